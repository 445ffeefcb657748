"""The web demo under the name seeds 001/002 launch it by.

```
streamlit run examples/internlm2_agent_web_demo.py --server.address 127.0.0.1 --server.port 7860
```

This is plait's web demo (`plait web`) with the InternLM2 plugin protocol preselected: type
the model server's address in the sidebar (``127.0.0.1:23333`` for `lmdeploy serve api_server`),
press Enter, pick plugins such as ``ArxivSearch``, and chat. Leave the model source on
"Embedded local model" to chat without a server.
"""

from __future__ import annotations

import os

os.environ.setdefault("PLAIT_WEB_AGENT", "internlm2")

from plait.web.app import main

main()
