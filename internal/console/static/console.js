// proxbus console: live updates over Server-Sent Events. The page names its stream in
// <body data-live>; the server sends HTML it rendered and escaped itself:
//   rows: {rows: [{id, html} | {id, remove: true}], total, held}  newest first
//   html: {target, html}                                          replaces #target's content
//   done: the page is complete (a finished command); stop listening.
"use strict";
(function () {
  const url = document.body.dataset.live;
  if (!url) return;
  const badge = document.getElementById("live");
  const fragment = (html) => {
    const t = document.createElement("template");
    t.innerHTML = html;
    return t.content;
  };
  const setState = (s) => { if (badge) { badge.dataset.state = s; badge.textContent = s; } };
  const es = new EventSource(url);
  es.onopen = () => setState("live");
  es.onerror = () => setState(es.readyState === EventSource.CLOSED ? "offline" : "reconnecting");
  es.addEventListener("rows", (e) => {
    const d = JSON.parse(e.data);
    const body = document.getElementById("rows");
    if (!body) return;
    const limit = parseInt(body.dataset.limit || "500", 10);
    // Rows come newest first: rows already shown are replaced in place, new ones go on top
    // in one insertion.
    const fresh = document.createDocumentFragment();
    for (const r of d.rows) {
      const old = document.getElementById(r.id);
      if (r.remove) { if (old) old.remove(); continue; }
      const row = fragment(r.html).firstElementChild;
      if (!row) continue;
      if (old) old.replaceWith(row); else fresh.append(row);
    }
    body.prepend(fresh);
    for (const empty of body.querySelectorAll("tr.empty")) {
      if (body.rows.length > 1) empty.remove();
    }
    while (body.rows.length > limit) body.lastElementChild.remove();
    const total = document.getElementById("total");
    if (total) total.textContent = String(d.total);
    const held = document.getElementById("held");
    if (held) held.textContent = String(d.held);
  });
  es.addEventListener("html", (e) => {
    const d = JSON.parse(e.data);
    const el = document.getElementById(d.target);
    if (el) el.replaceChildren(fragment(d.html));
  });
  es.addEventListener("done", () => { es.close(); setState("complete"); });
  window.addEventListener("pagehide", () => es.close());
})();
