// Model text (assistant turns, the report) rendered as Markdown. It is
// untrusted: a model can be talked into writing anything, including what a
// tool returned. marked turns it into HTML, and DOMPurify keeps only an
// allow-list of elements and attributes, so a <script>, an event handler
// attribute or a javascript: link never runs. Links open in a new tab and
// tell the target nothing about this page.
import DOMPurify from "dompurify";
import { marked } from "marked";

let hooked = false;

function hook(): void {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
}

/** `text` as sanitized Markdown, ready to append. */
export function renderMarkdown(text: string): DocumentFragment {
  hook();
  const html = marked.parse(text, { async: false, gfm: true, breaks: false }).trim();
  return DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
    FORBID_ATTR: ["style"],
    RETURN_DOM_FRAGMENT: true,
  });
}
