// Wires the harness: window.sandbox (JavaScript) and window.pythonSandbox for tests, the
// planted secrets, a Ping counter, and a Run button for trying JavaScript by hand.
import { PythonSandbox } from "../ui/python-sandbox-host.js";
import { JavaScriptSandbox } from "../ui/sandbox-host.js";

const SECRET = "page-secret";

async function plantSecrets() {
  document.cookie = `secret=${SECRET}-cookie; SameSite=Strict; path=/`;
  localStorage.setItem("secret", `${SECRET}-localstorage`);
  sessionStorage.setItem("secret", `${SECRET}-sessionstorage`);
  const db = await new Promise((resolve, reject) => {
    const open = indexedDB.open("harness-secrets", 1);
    open.onupgradeneeded = () => open.result.createObjectStore("secrets");
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  });
  await new Promise((resolve, reject) => {
    const tx = db.transaction("secrets", "readwrite");
    tx.objectStore("secrets").put(`${SECRET}-indexeddb`, "secret");
    tx.oncomplete = resolve;
    tx.onerror = () => reject(tx.error);
  });
  db.close();
  const cache = await caches.open("harness-secrets");
  await cache.put(new Request("/secret"), new Response(`${SECRET}-cache`));
}

let pings = 0;
document.getElementById("ping").addEventListener("click", () => {
  pings += 1;
  document.getElementById("pings").textContent = String(pings);
});

const sandbox = new JavaScriptSandbox();
window.sandbox = sandbox;
window.pythonSandbox = new PythonSandbox();

document.getElementById("run").addEventListener("click", async () => {
  const output = document.getElementById("result");
  output.textContent = "running…";
  const started = performance.now();
  const result = await sandbox.run(document.getElementById("code").value);
  const ms = Math.round(performance.now() - started);
  output.textContent = `${ms} ms\n${JSON.stringify(result, null, 2)}`;
});

try {
  await plantSecrets();
  await sandbox.ready();
  document.body.dataset.status = "ready";
} catch (error) {
  document.body.dataset.status = "failed";
  document.getElementById("result").textContent = String(error);
}
