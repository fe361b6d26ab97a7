/**
 * The site's own texts (the options `Notice`, `Footer` and `About`, written by root) drawn safely: Markdown
 * turned into DOM nodes by this module's small renderer, and HTML parsed inertly and copied through an
 * allow-list. Nothing is ever assigned to `innerHTML` of the page: text is set as text, links keep only
 * `http:`, `https:`, `mailto:` and addresses on this site, and no attribute but a few harmless ones
 * survives — so a notice cannot run a script, style the console, or send the reader's data anywhere.
 *
 * The Markdown understood (what notices use): `#` headings, paragraphs, `-`/`*`/`1.` lists (one level),
 * `>` quotes, fenced code, `---` rules; inline `code`, `**strong**`, `*emphasis*`/`_emphasis_`,
 * `[text](address)` links and bare `https://` addresses. Images are not drawn (the console loads images
 * from its own origin only).
 */

import { h } from "./dom.js";

/** What a text option is: an address (the whole text), HTML (it starts with a tag), else Markdown. */
/** @typedef {"url" | "html" | "markdown"} TextKind */

/**
 * @param {string} text
 * @returns {TextKind}
 */
export function kindOf(text) {
  const trimmed = text.trim();
  if (/^https?:\/\/\S+$/.test(trimmed)) return "url";
  if (/^<[a-zA-Z!]/.test(trimmed)) return "html";
  return "markdown";
}

/**
 * A link's address if it is safe to follow (http, https, mailto, or a path on this site), else null.
 * @param {string | null} address
 */
export function safeHref(address) {
  if (!address) return null;
  const trimmed = address.trim();
  if (trimmed.startsWith("/") && !trimmed.startsWith("//")) return trimmed;
  if (trimmed.startsWith("#")) return trimmed;
  try {
    const url = new URL(trimmed);
    return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

/**
 * A link to `href` (opened in a new tab when it leaves the site), or its text alone when unsafe.
 * @param {string | null} address
 * @param {import("./dom.js").Leaf[]} children
 */
function link(address, children) {
  const href = safeHref(address);
  if (!href) return h("span", {}, children);
  const away = /^(https?|mailto):/.test(href);
  return h("a", { href, rel: away ? "noopener noreferrer" : false, target: away ? "_blank" : false }, children);
}

const INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*|_[^_\s][^_]*_)|(\[[^\]]+\]\([^)\s]+\))|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;

/**
 * Inline Markdown as nodes.
 * @param {string} text
 * @returns {import("./dom.js").Leaf[]}
 */
function inline(text) {
  /** @type {import("./dom.js").Leaf[]} */
  const out = [];
  let rest = text;
  for (let found = INLINE.exec(rest); found; found = INLINE.exec(rest)) {
    if (found.index) out.push(rest.slice(0, found.index));
    const [whole, code, strong, em, anchor, bare] = found;
    if (code) out.push(h("code", {}, code.slice(1, -1)));
    else if (strong) out.push(h("strong", {}, inline(strong.slice(2, -2))));
    else if (em) out.push(h("em", {}, inline(em.slice(1, -1))));
    else if (anchor) {
      const split = anchor.lastIndexOf("](");
      out.push(link(anchor.slice(split + 2, -1), inline(anchor.slice(1, split))));
    } else if (bare) out.push(link(bare, [bare]));
    rest = rest.slice(found.index + whole.length);
  }
  if (rest) out.push(rest);
  return out;
}

/**
 * Markdown as a fragment of nodes.
 * @param {string} text
 * @returns {DocumentFragment}
 */
export function markdown(text) {
  const fragment = document.createDocumentFragment();
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  /** @type {string[]} */
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) fragment.append(h("p", {}, inline(paragraph.join(" "))));
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i];
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (!line.trim()) {
      flush();
    } else if (line.startsWith("```")) {
      flush();
      const code = [];
      for (i += 1; i < lines.length && !lines[i].startsWith("```"); i += 1) code.push(lines[i]);
      fragment.append(h("pre", {}, h("code", {}, code.join("\n"))));
    } else if (heading) {
      flush();
      // a notice's headings sit under the page's own: level 1 and 2 become 3, the rest follow
      const level = Math.min(6, Math.max(3, heading[1].length + 1));
      fragment.append(h(/** @type {"h3"} */ (`h${level}`), {}, inline(heading[2])));
    } else if (/^(-{3,}|\*{3,})\s*$/.test(line)) {
      flush();
      fragment.append(h("hr"));
    } else if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      flush();
      const ordered = /^\s*\d/.test(line);
      const items = [];
      for (; i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i]); i += 1) {
        items.push(h("li", {}, inline(lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ""))));
      }
      i -= 1;
      fragment.append(h(ordered ? "ol" : "ul", {}, items));
    } else if (line.startsWith(">")) {
      flush();
      const quoted = [];
      for (; i < lines.length && lines[i].startsWith(">"); i += 1) quoted.push(lines[i].replace(/^>\s?/, ""));
      i -= 1;
      fragment.append(h("blockquote", {}, markdown(quoted.join("\n"))));
    } else {
      paragraph.push(line.trim());
    }
  }
  flush();
  return fragment;
}

/** Elements HTML texts may keep (others are replaced by their children; the dangerous ones dropped whole). */
const KEPT = new Set(["a", "p", "br", "strong", "b", "em", "i", "u", "s", "small", "code", "pre", "ul", "ol",
  "li", "blockquote", "hr", "span", "div", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr",
  "th", "td", "sub", "sup"]);
const DROPPED = new Set(["script", "style", "iframe", "object", "embed", "template", "noscript", "link", "meta",
  "form", "input", "button", "select", "textarea", "svg", "math", "img", "video", "audio", "source", "head", "title"]);

/**
 * Copy a parsed node's allowed parts into the page's document.
 * @param {Node} node
 * @returns {Node[]}
 */
function copy(node) {
  if (node.nodeType === Node.TEXT_NODE) return [document.createTextNode(node.textContent ?? "")];
  if (!(node instanceof Element)) return [];
  const tag = node.tagName.toLowerCase();
  if (DROPPED.has(tag)) return [];
  const children = [...node.childNodes].flatMap(copy);
  if (!KEPT.has(tag)) return children;
  if (tag === "a") return [link(node.getAttribute("href"), children)];
  const level = /^h([1-6])$/.exec(tag);
  const made = document.createElement(level ? `h${Math.min(6, Math.max(3, Number(level[1]) + 1))}` : tag);
  const title = node.getAttribute("title");
  if (title) made.setAttribute("title", title);
  made.append(...children);
  return [made];
}

/** Handler and style attributes, and style elements, taken out before parsing (see `html`). */
const INLINE_CODE = /[\s/](?:on[a-z]+|style)\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+)|<style\b[\s\S]*?(?:<\/style\s*>|$)/gi;

/**
 * HTML as a fragment of allowed nodes: parsed in a document of its own (where nothing runs or loads),
 * then copied through the allow-list, which keeps no attribute but a safe `href` and `title`. Handler and
 * style attributes and style elements are cut from the text first: the browser would block them anyway
 * (the console's policy allows no inline script or style), but would report each to the console while
 * parsing. The cut only spares those reports: what is safe is decided by the allow-list.
 * @param {string} text
 * @returns {DocumentFragment}
 */
export function html(text) {
  const parsed = new DOMParser().parseFromString(text.replace(INLINE_CODE, ""), "text/html");
  const fragment = document.createDocumentFragment();
  fragment.append(...[...parsed.body.childNodes].flatMap(copy));
  return fragment;
}

/**
 * A site text as nodes, whatever its kind: an address becomes a link to it (`linkText` its words).
 * @param {string} text
 * @param {string} linkText
 */
export function siteText(text, linkText) {
  const kind = kindOf(text);
  if (kind === "url") {
    const fragment = document.createDocumentFragment();
    fragment.append(h("p", {}, link(text.trim(), [linkText])));
    return fragment;
  }
  return kind === "html" ? html(text) : markdown(text);
}
