"""Engines that run in Python and reach their model over the network: a model server
(:mod:`agent_py.engines.model_server`). They use the HTTP transports of :mod:`agent_py.mcp`
(httpx in CPython; the page's fetch or the bridge extension in the page) and never import
the page. The page's own engines (WebLLM, the CPU engine) are JavaScript, behind
:class:`agent_py.page.engine.BridgeLLM`."""
