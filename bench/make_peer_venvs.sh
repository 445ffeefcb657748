#!/usr/bin/env bash
# Create one virtual environment per peer framework for bench/compare.py: bench/.venvs/<peer>.
#
#   bash bench/make_peer_venvs.sh            # every peer
#   bash bench/make_peer_venvs.sh lagent     # only the ones named
#
# A peer whose install fails is reported and skipped; compare.py leaves out a peer without a venv.
# PYTHON picks the interpreter (default python3).
set -u
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}

requirements() {
    case "$1" in
        lagent) echo "lagent>=0.5.0rc1,<0.6" ;;  # 0.5 exists only as release candidates
        smolagents) echo "smolagents[openai]" ;;
        langchain) echo "langchain langchain-openai" ;;
        pydantic-ai) echo "pydantic-ai-slim[openai]" ;;
        openai-agents) echo "openai-agents" ;;
        *) return 1 ;;
    esac
}

peers=("$@")
[ ${#peers[@]} -eq 0 ] && peers=(lagent smolagents langchain pydantic-ai openai-agents)
status=0
for peer in "${peers[@]}"; do
    if ! packages=$(requirements "$peer"); then
        echo "unknown peer: $peer" >&2
        status=1
        continue
    fi
    venv=".venvs/$peer"
    echo "== $peer: $packages"
    # shellcheck disable=SC2086  # $packages is a list of words
    if "$PYTHON" -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check $packages 2> >(grep -v "^WARNING: Location" >&2); then
        "$venv/bin/pip" freeze --disable-pip-version-check | grep -iE "^(${peer//-/[-_]}|openai|langchain[-_a-z]*|pydantic[-_a-z]*)=="
    else
        echo "!! $peer did not install; compare.py will leave it out" >&2
        rm -rf "$venv"
        status=1
    fi
done
exit $status
