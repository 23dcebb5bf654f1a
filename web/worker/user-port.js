// What the agent needs from the user (agent_py.page.user), in the agent worker: OAuth sign-in
// through a popup, kept tokens, elicitation forms, and plan review. The UI thread does the
// showing (user-prompts.js, plan-review.js); this side only passes messages (mcp-authorize,
// mcp-auth-save, mcp-elicit and plan-review out; mcp-authorized, mcp-elicited and
// plan-reviewed back: protocol.js).
//
// The worker registers `api` as the Pyodide module "agent_user": callbackUrl, authorize,
// saveAuth, elicit and reviewPlan take and return JSON strings and never reject, as
// agent_py/page/user.py describes.
import { ToWorker, bridgeFailed, bridgeOk, toUI } from "../protocol.js";

export function createUserPort(post) {
  const pending = new Map(); // id -> resolve
  let nextId = 1;
  const ask = (makeMessage) =>
    new Promise((resolve) => {
      const id = nextId++;
      pending.set(id, resolve);
      post(makeMessage(id));
    });

  const api = {
    callbackUrl: new URL("../oauth-callback.html", import.meta.url).href,
    async authorize(requestJson) {
      const { server, url } = JSON.parse(requestJson);
      const reply = await ask((id) => toUI.mcpAuthorize(id, server, url));
      return reply.url ? bridgeOk({ url: reply.url }) : bridgeFailed("cancelled", reply.error || "the sign-in window was closed");
    },
    saveAuth(recordJson) {
      const { url, record } = JSON.parse(recordJson);
      post(toUI.mcpAuthSave(url, record));
    },
    async elicit(formJson) {
      const reply = await ask((id) => toUI.mcpElicit(id, JSON.parse(formJson)));
      return JSON.stringify(reply.answer || { action: "cancel" });
    },
    async reviewPlan(requestJson) {
      const reply = await ask((id) => toUI.planReview(id, JSON.parse(requestJson)));
      return JSON.stringify(reply.answer || { action: "cancel" });
    },
  };

  /** Handles the UI thread's answers; true when the message was one of them. */
  function onMessage(message) {
    if (![ToWorker.MCP_AUTHORIZED, ToWorker.MCP_ELICITED, ToWorker.PLAN_REVIEWED].includes(message.type)) return false;
    const resolve = pending.get(message.id);
    pending.delete(message.id);
    resolve?.(message);
    return true;
  }

  return { api, onMessage };
}
