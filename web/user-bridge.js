// What the MCP client needs from the user (agent_py.mcp.browser_user), in the agent worker:
// OAuth sign-in through a popup, kept tokens, and elicitation forms. The UI thread does the
// showing (user-prompts.js); this side only passes messages.
//
// The worker registers `api` as the Pyodide module "agent_user". Its methods take and return
// JSON strings and never reject:
//   callbackUrl                  the page's OAuth redirect URI (oauth-callback.html)
//   authorize(requestJson)   -> {ok: true, url} | {ok: false, error}
//                               request: {server, url}; url: where the callback page landed
//   saveAuth(recordJson)         {url, record | null}: keep or drop a server's tokens
//   elicit(formJson)         -> {action: "accept" | "decline" | "cancel", content?}
// Messages:
//   worker -> UI   {type: "mcp-authorize", id, server, url}
//                  {type: "mcp-auth-save", url, record}
//                  {type: "mcp-elicit", id, form}
//   UI -> worker   {type: "mcp-authorized", id, url} | {type: "mcp-authorized", id, error}
//                  {type: "mcp-elicited", id, answer}

export function createUserBridge(post) {
  const pending = new Map(); // id -> resolve
  let nextId = 1;
  const ask = (message) =>
    new Promise((resolve) => {
      const id = nextId++;
      pending.set(id, resolve);
      post({ ...message, id });
    });

  const api = {
    callbackUrl: new URL("./oauth-callback.html", import.meta.url).href,
    async authorize(requestJson) {
      const { server, url } = JSON.parse(requestJson);
      const reply = await ask({ type: "mcp-authorize", server, url });
      return JSON.stringify(reply.url ? { ok: true, url: reply.url } : { ok: false, error: reply.error || "cancelled" });
    },
    saveAuth(recordJson) {
      const { url, record } = JSON.parse(recordJson);
      post({ type: "mcp-auth-save", url, record });
    },
    async elicit(formJson) {
      const reply = await ask({ type: "mcp-elicit", form: JSON.parse(formJson) });
      return JSON.stringify(reply.answer || { action: "cancel" });
    },
  };

  /** Handles the UI thread's answers; true when the message was one of them. */
  function onMessage(message) {
    if (message.type !== "mcp-authorized" && message.type !== "mcp-elicited") return false;
    const resolve = pending.get(message.id);
    pending.delete(message.id);
    resolve?.(message);
    return true;
  }

  return { api, onMessage };
}
