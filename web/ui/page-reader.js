// A fetched page's readable text, for the `fetch_page` tool (agent_py/tools/fetch_page.py):
// the browser's own HTML parser (DOMParser, which runs no script and loads nothing), then
// Mozilla's Readability (vendor/readability, from npm) for the page's main content, written
// out as Markdown-like text (headings, paragraphs, lists, tables, code) by a walk of the DOM.
// A page Readability finds no article in (a short page, a table) is written out whole, less
// its scripts, styles, navigation and forms. The text is data for the agent, never markup for
// this page: nothing of it is inserted into the document.

const READABILITY_URL = new URL("../vendor/readability/Readability.js", import.meta.url).href;
const SKIPPED = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "IFRAME", "OBJECT", "EMBED", "SVG",
  "CANVAS", "FORM", "BUTTON", "SELECT", "INPUT", "TEXTAREA", "NAV", "HEAD"]);
const BLOCKS = new Set(["P", "DIV", "SECTION", "ARTICLE", "MAIN", "HEADER", "FOOTER", "ASIDE", "BLOCKQUOTE",
  "FIGURE", "FIGCAPTION", "DL", "DT", "DD", "ADDRESS", "DETAILS", "SUMMARY", "CAPTION", "BODY", "HTML", "HR"]);

let readability = null;

/** Readability's constructor: its script (a classic one, not a module) loaded once. */
function loadReadability() {
  readability ??= new Promise((resolve, reject) => {
    const script = Object.assign(document.createElement("script"), { src: READABILITY_URL });
    script.onload = () => resolve(window.Readability);
    script.onerror = () => {
      readability = null;
      reject(new Error("the page reader (Readability) could not be loaded"));
    };
    document.head.append(script);
  });
  return readability;
}

const squeeze = (text) => text.replace(/\s+/g, " ");

/** The inline text of `node`: whitespace collapsed as a browser shows it, <br> a line break. */
function inline(node) {
  let text = "";
  for (const child of node.childNodes) {
    if (child.nodeType === Node.TEXT_NODE) text += squeeze(child.data);
    else if (child.nodeType !== Node.ELEMENT_NODE || SKIPPED.has(child.tagName.toUpperCase())) continue;
    else if (child.tagName === "BR") text += "\n";
    else if (child.tagName === "IMG") text += child.getAttribute("alt") ? ` ${child.getAttribute("alt")} ` : "";
    else text += inline(child);
  }
  return text;
}

function cells(row) {
  return [...row.children]
    .filter((cell) => cell.tagName === "TD" || cell.tagName === "TH")
    .map((cell) => inline(cell).replace(/\s+/g, " ").trim().replaceAll("|", "\\|"));
}

function table(node, out) {
  const rows = [...node.querySelectorAll("tr")].map(cells).filter((row) => row.length);
  if (!rows.length) return;
  const caption = node.querySelector("caption");
  if (caption) out.push(inline(caption).trim());
  out.push(`| ${rows[0].join(" | ")} |`, `|${" --- |".repeat(rows[0].length)}`);
  for (const row of rows.slice(1)) out.push(`| ${row.join(" | ")} |`);
}

/** Appends the blocks of `node` to `out` (one string a block). */
function blocks(node, out, depth = 0) {
  let run = "";
  const flush = () => {
    const text = run.replace(/[ \t]*\n[ \t]*/g, "\n").trim();
    if (text) out.push(text);
    run = "";
  };
  for (const child of node.childNodes) {
    if (child.nodeType === Node.TEXT_NODE) {
      run += squeeze(child.data);
      continue;
    }
    if (child.nodeType !== Node.ELEMENT_NODE) continue;
    const tag = child.tagName.toUpperCase(); // an <svg> keeps its lower-case name
    if (SKIPPED.has(tag)) continue;
    const heading = /^H([1-6])$/.exec(tag);
    if (heading) {
      flush();
      const text = squeeze(inline(child)).trim();
      if (text) out.push(`${"#".repeat(Number(heading[1]))} ${text}`);
    } else if (tag === "UL" || tag === "OL") {
      flush();
      let n = 0;
      for (const item of child.children) {
        if (item.tagName !== "LI") continue;
        n += 1;
        const inner = [];
        blocks(item, inner, depth + 1);
        const marker = tag === "OL" ? `${n}.` : "-";
        const [first = "", ...rest] = inner.join("\n").split("\n");
        out.push([`${"  ".repeat(depth)}${marker} ${first}`, ...rest.map((line) => `${"  ".repeat(depth + 1)}${line}`)].join("\n"));
      }
    } else if (tag === "TABLE") {
      flush();
      table(child, out);
    } else if (tag === "PRE") {
      flush();
      out.push("```\n" + child.textContent.replace(/\n+$/, "") + "\n```");
    } else if (tag === "BR") {
      run += "\n";
    } else if (BLOCKS.has(tag) || tag === "LI") {
      flush();
      blocks(child, out, depth);
    } else if (tag === "IMG") {
      if (child.getAttribute("alt")) run += ` ${child.getAttribute("alt")} `;
    } else {
      run += inline(child);
    }
  }
  flush();
}

/** Markdown-like text of the element `root`. */
export function textOf(root) {
  const out = [];
  blocks(root, out);
  return out.join("\n\n");
}

/** {ok: true, title, text} for the page `html` fetched from `url`, or {ok: false, error}. */
export async function readablePage(html, url) {
  try {
    const doc = new DOMParser().parseFromString(String(html), "text/html");
    // Relative links and images resolve against the page's own address, not ours.
    const base = doc.createElement("base");
    base.href = url;
    doc.head.prepend(base);
    const title = squeeze(doc.title || "").trim();
    let text = "";
    let articleTitle = "";
    try {
      const Readability = await loadReadability();
      const article = new Readability(doc.cloneNode(true), { keepClasses: false }).parse();
      if (article?.content) {
        const content = new DOMParser().parseFromString(article.content, "text/html");
        text = textOf(content.body);
        articleTitle = squeeze(article.title || "").trim();
      }
    } catch (error) {
      if (String(error?.message).includes("could not be loaded")) throw error;
      text = ""; // Readability gave up on this page: it is read whole below
    }
    // What Readability kept must hold the page's text: a short page (a price, a table) is
    // often dropped as "not an article", and its whole text is better than a fragment.
    const whole = textOf(doc.body);
    if (text.length < Math.min(whole.length, 500) * 0.5) text = whole;
    return { ok: true, title: articleTitle || title, text };
  } catch (error) {
    return { ok: false, error: `the page could not be read: ${error?.message || error}` };
  }
}
