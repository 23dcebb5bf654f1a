// The page's status line and its error line: what the page is doing and what went wrong, in
// words for the user. The page's drivers read window.agentApp's states (driver-api.js) instead.
const $ = (id) => document.getElementById(id);

export function setStatus(text) {
  $("status").textContent = text;
  document.body.dataset.status = text.toLowerCase().split(/[^a-z]/)[0];
}

export function showError(message) {
  $("error").textContent = message;
}
