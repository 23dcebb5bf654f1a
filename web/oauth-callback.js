// Where an OAuth authorization server sends the sign-in popup back to (the redirect URI of
// the page). It hands its own URL (code and state, or an error) to the page that opened the
// popup, over a BroadcastChannel of this origin: the opener link does not survive the
// cross-origin navigation when the page is cross-origin isolated. user-prompts.js listens.
import { OAUTH_CHANNEL, oauthCallback } from "./protocol.js";

const channel = new BroadcastChannel(OAUTH_CHANNEL);
channel.postMessage(oauthCallback(location.href));
channel.close();
document.getElementById("message").textContent = "Signed in. You can close this window.";
window.close();
