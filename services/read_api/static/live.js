// Keeps an open claim page or scorecard up to date. The page names its live stream (data-live on
// <body>); when the stream says the data changed, the page is fetched again with ?after= that change's
// sequence (so it shows it) and its <main> swapped in. Without JavaScript the page is the same, unchanging.
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
        const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
        const main = fresh.querySelector("main");
        if (main) document.querySelector("main").replaceWith(main);
        document.body.dataset.shownSeq = String(after);
      } catch (error) {
        // The next change, or the stream's reconnection, brings the page up to date.
      }
    }
    fetching = false;
  }

  source.addEventListener("changed", (message) => {
    const data = JSON.parse(message.data);
    wanted = Math.max(wanted, data.seq ?? data.through ?? 0);
    if (!fetching) refresh();
  });
})();
