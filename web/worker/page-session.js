// Python's side of the agent, started in Pyodide: the JavaScript modules Python imports are
// registered, agent_py.page.session.PageSession (agent_py/page/session.py) is made over them,
// and the page's event loop is installed. Also how a Python exception is told to the user.

// Python's part of the boot, each import timed: the last expression is the phases as JSON.
// agent_py.page.session imports the MCP package only once a server is configured, and jsonschema
// at the first tool call (warmed up after "ready", in agent.js).
const PYTHON_BOOT = `
import json, time
_phases = {}
_last = time.perf_counter()
def _phase(name):
    global _last
    now = time.perf_counter()
    _phases[name] = round((now - _last) * 1000)
    _last = now
import pydantic_core; _phase("import_pydantic_core")
import pydantic; _phase("import_pydantic")
import pyodide_http
pyodide_http.patch_all()  # urllib-based code can reach the network through fetch
import agent_bridge, agent_http, agent_user
import agent_py.page.session; _phase("import_agent_py")
page = agent_py.page.session.PageSession(agent_bridge, http=agent_http, user=agent_user)
_phase("page_session")
json.dumps(_phases)
`;

/**
 * Makes the PageSession in a started Pyodide.
 * @param {object} pyodide
 * @param {{agent_bridge: object, agent_http: object, agent_user: object}} modules  registered
 *   under these names, which PYTHON_BOOT imports
 * @returns {Promise<{page: object, loopDrains: () => number, phases: object}>}  the session (a
 *   PyProxy, kept for the worker's lifetime), the loop's count of ready-queue runs, and the
 *   boot's phases in ms
 */
export async function startPageSession(pyodide, modules) {
  for (const [name, module] of Object.entries(modules)) pyodide.registerJsModule(name, module);
  const phases = JSON.parse(await pyodide.runPythonAsync(PYTHON_BOOT));
  // Between tasks, so every later one runs on it: ready callbacks run together, not each in
  // a browser task of its own (agent_py/page/loop.py).
  const loopDrains = pyodide.runPython("import agent_py.page.loop as l; l.install(); l.drains");
  return { page: pyodide.globals.get("page"), loopDrains, phases };
}

// A Python exception's own words, without the traceback Pyodide puts before them.
export function pythonMessage(error) {
  const last = String(error?.message || error).trim().split("\n").pop();
  return last.replace(/^[\w.]+: /, "");
}
