// Keeps an open claim page, listing or scorecard up to date. The page names its live stream (data-live on
// <body>); when the stream says the data changed, the page is fetched again with ?after= that change's
// sequence (so it shows it) and swapped in: the parts marked data-live-part (the listing's results, so its
// search form keeps what a reader is typing), or else its whole <main>. A fold the reader opened (a
// <details> with an id, such as a claim's resolved disagreements) stays open across the swap. Without
// JavaScript the page is the same, unchanging.
(() => {
  const stream = document.body.dataset.live;
  if (!stream || !window.EventSource) return;
  const source = new EventSource(stream);
  let wanted = 0;
  let fetching = false;

  async function refresh() {
    fetching = true;
    while (wanted) {
      const after = wanted;
      wanted = 0;
      const url = new URL(window.location.href);
      url.searchParams.set("after", String(after));
      try {
        const response = await fetch(url, { headers: { Accept: "text/html" } });
        if (!response.ok) continue;
        swapIn(new DOMParser().parseFromString(await response.text(), "text/html"));
        document.body.dataset.shownSeq = String(after);
      } catch (error) {
        // The next change, or the stream's reconnection, brings the page up to date.
      }
    }
    fetching = false;
  }

  // The fresh page's live parts in place of the shown ones; a page that marks none, its whole <main>.
  function swapIn(fresh) {
    const parts = document.querySelectorAll("main [data-live-part][id]");
    const shown = parts.length ? [...parts] : [document.querySelector("main")];
    for (const part of shown) {
      const same = part.id ? fresh.getElementById(part.id) : fresh.querySelector("main");
      if (!same) continue;
      keepFolds(part, same);
      part.replaceWith(same);
    }
  }

  // Each fold of the fresh part as the reader left it on the part shown.
  function keepFolds(shown, fresh) {
    for (const fold of shown.querySelectorAll("details[id]")) {
      const same = fresh.querySelector(`details#${CSS.escape(fold.id)}`);
      if (same) same.open = fold.open;
    }
  }

  // The page says when its stream is connected: from then on, every change is heard.
  source.addEventListener("open", () => {
    document.body.dataset.liveOpen = "true";
  });

  source.addEventListener("changed", (message) => {
    const data = JSON.parse(message.data);
    wanted = Math.max(wanted, data.seq ?? data.through ?? 0);
    if (!fetching) refresh();
  });
})();
