/* The site's search ranking (conf.py: html_search_scorer). Sphinx's index records whether a page holds each word,
 * not where, so every page that holds "loss" and "scaling" ties, and ties go alphabetically: notebook 03 came
 * before 07, which is about loss scaling. Here a page with a heading that holds the whole query, as typed,
 * ranks above pages that only hold its words somewhere. Sphinx's own weights are kept. */
var Scorer = {
  score: (result) => {
    const [docname, , , , score] = result;
    const query = (new URLSearchParams(window.location.search).get("q") || "").toLowerCase().trim();
    const index = (typeof Search !== "undefined" && Search._index) || {};
    if (!query || !index.alltitles) return score;
    for (const [title, places] of Object.entries(index.alltitles)) {
      if (title.toLowerCase().includes(query) && places.some(([file]) => index.docnames[file] === docname)) {
        return score + 10;
      }
    }
    return score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {0: 15, 1: 5, 2: -5},
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
