/**
 * Building DOM nodes without HTML strings: `h("button", {type: "button", onclick}, "Save")`.
 *
 * Text is always set as text (never parsed as HTML), so nothing a server or a user typed can become
 * markup. Attributes: `class`, `for` and every other name are set with `setAttribute`; a function under an
 * `on…` name becomes an event listener; `false`, `null` and `undefined` leave the attribute out; `true`
 * sets it empty. Children may be strings, numbers, nodes, arrays of them, or null/false (skipped).
 */

/** @typedef {string | number | boolean | null | undefined | EventListener | ((event: any) => void)} AttrValue */
/** @typedef {Record<string, AttrValue>} Attrs */
/** @typedef {Node | string | number | null | undefined | false} Leaf */
/** @typedef {Leaf | Leaf[] | Leaf[][]} Child */

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * @param {Element} element
 * @param {Attrs} attrs
 */
function apply(element, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), /** @type {EventListener} */ (value));
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

/**
 * @param {Node} parent
 * @param {Child[]} children
 */
export function append(parent, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

/**
 * An HTML element.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs} [attrs]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  apply(element, attrs);
  append(element, children);
  return element;
}

/**
 * An SVG element.
 * @template {keyof SVGElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs} [attrs]
 * @param {...Child} children
 * @returns {SVGElementTagNameMap[K]}
 */
export function svg(tag, attrs = {}, ...children) {
  const element = /** @type {SVGElementTagNameMap[K]} */ (document.createElementNS(SVG_NS, tag));
  apply(element, attrs);
  append(element, children);
  return element;
}

/**
 * Replace every child of `parent`.
 * @param {Element} parent
 * @param {...Child} children
 */
export function replace(parent, ...children) {
  parent.replaceChildren();
  append(parent, children);
}

let counter = 0;

/**
 * A document-unique id (for `for`, `aria-describedby`, `aria-labelledby`).
 * @param {string} prefix
 */
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}
