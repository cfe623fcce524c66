// The evidence inspector of `memorag serve`: upload, ask (streamed), and open the evidence's sources.
// It talks to this server's API only. Every text that comes from a document, a model or the server is
// put into the page with textContent (through `el`), never as HTML: a document that holds markup shows it.
"use strict";

// `named`: the user has typed or chosen a corpus name; from then on the page never changes it
const state = { key: sessionStorage.getItem("memorag-key") || "", limits: null, named: false, shownPage: 0,
  modeNotes: {} };
const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === "class") node.className = value;
    else if (name === "data") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function headers(json) {
  const result = json ? { "Content-Type": "application/json" } : {};
  if (state.key) result.Authorization = "Bearer " + state.key;
  return result;
}

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.error ? body.error : "the server answered " + status);
    this.status = status;
    this.files = (body && body.files) || [];
  }
}

async function failure(response) {
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (response.status === 401) $("key-form").hidden = false;
  return new ApiError(response.status, body);
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.body !== undefined) });
  if (!response.ok) throw await failure(response);
  return response.json();
}

// ---- server-sent events over a POST (EventSource can only GET) -------------------------------

async function postEvents(path, body, onEvent) {
  const response = await fetch(path, { method: "POST", headers: headers(true), body: JSON.stringify(body) });
  if (!response.ok) throw await failure(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      onEvent(event, JSON.parse(data.join("\n")));
    }
  }
}

// ---- the server and its corpora -----------------------------------------------------------------

async function loadHealth() {
  const health = await api("/health");
  state.limits = health.limits;
  const models = health.models;
  const found = models.retriever === "bm25" ? "BM25" : `${models.retriever} retrieval with ${models.embedder}`;
  const writer = models.generator_is_memory_base ? `${models.generator} (the memory model's base)` : models.generator;
  $("server-status").textContent = `memory model: ${models.memory_model} (memory weights: ${models.memory_weights}) · ` +
    `passages found by ${found} · answers written by ${writer} · ${health.pending} request(s) running or queued`;
  state.modeNotes = Object.fromEntries((health.mode_notes || []).map((note) => [note.name, note]));
  const label = (mode) => (state.modeNotes[mode] ? `${mode}: ${state.modeNotes[mode].description}` : mode);
  for (const [select, chosen] of [[$("mode-a"), "memorag"], [$("mode-b"), "rag"]]) {
    select.replaceChildren(...health.modes.map((mode) => el("option", { value: mode }, label(mode))));
    select.value = health.modes.includes(chosen) ? chosen : health.modes[0];
  }
}

function corpusName() {
  return $("corpus-name").value.trim();
}

// The corpus list, for the name field's suggestions and the documents shown. A name the server does not
// know is a corpus still to be memorized and is kept; only when the page opens, before the user has named
// one, is the default name replaced by the first corpus there is.
async function loadCorpora({ offerFirst = false } = {}) {
  const { corpora } = await api("/corpora");
  $("corpus-names").replaceChildren(...corpora.map((corpus) => el("option", { value: corpus.name })));
  if (offerFirst && !state.named && corpora.length && !corpora.some((corpus) => corpus.name === corpusName())) {
    $("corpus-name").value = corpora[0].name;
  }
  const name = corpusName();
  showCorpus(name, corpora.find((corpus) => corpus.name === name));
}

function showCorpus(name, corpus) {
  $("corpus-shown").textContent = name || "—";
  const items = corpus ? corpus.documents.map((doc) => el("li", {}, doc)) : [el("li", { class: "muted" }, "none yet")];
  if (corpus) items.push(el("li", { class: "muted" }, `${corpus.num_chunks.toLocaleString()} chunks · ${memorySize(corpus)}`));
  $("documents").replaceChildren(...items);
}

function memorySize(corpus) {
  // in the command line's words (`memorag memorize`, `memorag demo`)
  if (!corpus.memory_tokens) return "no memory (this corpus was memorized without one)";
  return `memory: ${corpus.memory_tokens.toLocaleString()} tokens read into ` +
    `${(corpus.memory_entries || 0).toLocaleString()} entries per layer`;
}

// ---- uploading --------------------------------------------------------------------------------

function readBase64(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
    reader.onerror = () => reject(new Error(`${file.name}: cannot be read by the browser`));
    reader.readAsDataURL(file);
  });
}

function setProgress(text, fraction) {
  const bar = $("memorize-progress");
  bar.hidden = fraction === null;
  if (fraction === undefined) bar.removeAttribute("value");
  else if (fraction !== null) bar.value = fraction;
  $("memorize-status").textContent = text;
}

function showRefusals(files, message) {
  const items = files.length
    ? files.map((file) => el("li", {}, el("strong", {}, file.name), ": ", file.error))
    : [el("li", {}, message)];
  $("refusals").replaceChildren(...items);
}

async function memorize() {
  const name = corpusName();
  const files = [...$("files").files];
  $("refusals").replaceChildren();
  if (!name || !files.length) {
    setProgress(!name ? "Give the corpus a name." : "Choose one or more files first.", null);
    return;
  }
  $("memorize").disabled = true;
  try {
    setProgress(`Reading ${files.length} file(s)…`, 0);
    const encoded = [];
    for (const file of files) encoded.push({ name: file.name, base64: await readBase64(file) });
    const size = encoded.reduce((total, file) => total + file.base64.length + file.name.length + 40, 0);
    if (state.limits && size > state.limits.max_body_bytes) {
      throw new Error(`these files make a request of ${size.toLocaleString()} bytes; this server takes at most ` +
        `${state.limits.max_body_bytes.toLocaleString()}: send fewer or smaller files at a time`);
    }
    setProgress("Sending and reading the files…", undefined);
    let report = null;
    await postEvents(`/corpora/${encodeURIComponent(name)}/memorize`, { files: encoded, stream: true },
      (event, data) => {
        if (event === "progress") {
          setProgress(`Memorizing: ${data.done.toLocaleString()} of ${data.total.toLocaleString()} tokens read`,
            data.total ? data.done / data.total : undefined);
        } else if (event === "report") report = data;
        else if (event === "error") throw new ApiError(data.status || 500, data);
      });
    if (!report) throw new Error("the memorize stream ended without a report");
    const added = report.added.length ? `added ${report.added.join(", ")}` : "nothing new";
    const skipped = report.skipped.length ? `; already there: ${report.skipped.join(", ")}` : "";
    setProgress(`Memorized into ${name}: ${added}${skipped}.`, 1);
    if (corpusName() === name) showCorpus(name, report.corpus);
    await loadCorpora();
  } catch (error) {
    setProgress("Refused: nothing was memorized.", null);
    showRefusals(error.files || [], error.message);
  } finally {
    $("memorize").disabled = false;
  }
}

// ---- asking -----------------------------------------------------------------------------------

function chip(index, text, title) {
  return el("span", { class: index === 0 ? "chip query" : "chip", title }, text);
}

function fetchedBy(item, clues) {
  // which retrieval lists fetched the passage: 0 is the question's own, i >= 1 clue i's. `found_by` gives
  // each list with its query, the passage's rank and score in it; without it, `queries` gives the indices
  const label = (index) => (index === 0 ? "query" : `clue ${index}`);
  if (Array.isArray(item.found_by) && item.found_by.length) {
    return item.found_by.map((found) => chip(found.query_index, `${label(found.query_index)} #${found.rank}`,
      `${found.query} (rank ${found.rank}, score ${Number(found.score).toFixed(3)} in this list)`));
  }
  const indices = Array.isArray(item.queries) ? item.queries.filter((index) => typeof index === "number") : [];
  return indices.map((index) => chip(index, label(index), index === 0 ? "the question itself" : clues[index - 1] || ""));
}

// Words of at least three letters that say something (not "the", "and"...), lower-case.
const COMMON = new Set(("the and for are but not you all any can had her was one our out has his how its may new " +
  "now see two who did get let say she too use what when where which while why with from that this there " +
  "these those they them then than into onto over also does have been were will would should could about " +
  "after before other some such only very more most much many each every your their").split(" "));

function wordsOf(text) {
  return new Set((String(text).toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) || []).filter((word) => !COMMON.has(word)));
}

// The passage's text with the words of the queries that fetched it marked (as text nodes and <mark>s).
function markedPassage(text, words) {
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(/[\p{L}\p{N}]+/gu)) {
    if (!words.has(match[0].toLowerCase())) continue;
    if (match.index > last) nodes.push(text.slice(last, match.index));
    nodes.push(el("mark", { class: "hit" }, match[0]));
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(text.slice(last));
  return nodes;
}

// Scroll a passage's preview so that its densest run of marked words (the most marks within about three
// lines) is in the middle of the box: the part that matched is in sight, not cut off below.
function centreOnMatch(preview) {
  const marks = [...preview.querySelectorAll("mark.hit")];
  if (!marks.length || preview.scrollHeight <= preview.clientHeight) return;
  const lineHeight = marks[0].offsetHeight || 16;
  let best = marks[0];
  let bestCount = 0;
  for (const mark of marks) {
    const count = marks.filter((other) => Math.abs(other.offsetTop - mark.offsetTop) <= 1.5 * lineHeight).length;
    if (count > bestCount) [best, bestCount] = [mark, count];
  }
  preview.scrollTop = Math.max(0, best.offsetTop - (preview.clientHeight - best.offsetHeight) / 2);
}

function renderLegend(run) {
  const note = state.modeNotes[run.dataset.mode];
  const legend = run.querySelector(".legend");
  if (!note) { legend.textContent = ""; return; }
  legend.replaceChildren(note.order ? `Listed ${note.order}. ` : "", el("strong", {}, "Score: "), `${note.score}.`);
}

function renderEvidence(run, evidence, clues) {
  renderLegend(run);
  const query = run.dataset.query || "";
  run.querySelector(".evidence").replaceChildren(...evidence.map((item) => {
    const cite = el("button", { type: "button", class: "cite", onclick: () => openSource(run.dataset.corpus, item) },
      item.citation || item.doc_id);
    const note = state.modeNotes[run.dataset.mode];
    const score = el("span", { class: "score", title: note ? `score: ${note.score}` : "retrieval score" },
      Number(item.score).toFixed(3));
    const chips = fetchedBy(item, clues);
    const by = el("span", { class: "fetched-by" }, chips.length ? el("span", { class: "muted" }, "fetched by") : null,
      ...chips);
    const fetchers = Array.isArray(item.queries) ? item.queries : [0];
    const words = wordsOf(fetchers.map((index) => (index === 0 ? query : clues[index - 1] || "")).join(" "));
    const preview = el("p", { class: "passage", title: "words of the question and of the clues that fetched " +
      "it are marked; the preview is scrolled to where most of them are" }, ...markedPassage(String(item.text), words));
    return el("li", {}, el("div", { class: "evidence-head" }, cite, score, by), preview);
  }));
  requestAnimationFrame(() => run.querySelectorAll(".passage").forEach(centreOnMatch));
}

function renderTimings(run, timings, firstToken) {
  const parts = Object.entries(timings || {}).map(([stage, seconds]) => `${stage} ${Number(seconds).toFixed(2)} s`);
  if (firstToken !== null) parts.push(`first token after ${firstToken.toFixed(2)} s`);
  run.querySelector(".timings").textContent = parts.join(" · ");
}

async function askOne(corpus, query, mode, run) {
  const started = performance.now();
  let firstToken = null;
  let clues = [];
  const answer = run.querySelector(".answer");
  const stateLine = run.querySelector(".run-state");
  stateLine.textContent = "waiting for the server…";
  try {
    await postEvents(`/corpora/${encodeURIComponent(corpus)}/ask`, { query, mode, stream: true }, (event, data) => {
      if (event === "clues") {
        clues = data;
        run.querySelector(".clues").replaceChildren(...data.map((clue) => el("li", {}, clue)));
        stateLine.textContent = "retrieving…";
      } else if (event === "evidence") {
        renderEvidence(run, data, clues);
        stateLine.textContent = "answering…";
      } else if (event === "token") {
        if (firstToken === null) firstToken = (performance.now() - started) / 1000;
        answer.textContent += data.text;
      } else if (event === "answer") {
        answer.textContent = data.answer;
        clues = data.clues;
        run.querySelector(".clues").replaceChildren(...data.clues.map((clue) => el("li", {}, clue)));
        renderEvidence(run, data.evidence, clues);
        renderTimings(run, data.timings, firstToken);
        const unanswered = data.answered === false;  // the reply was empty or only repeated the question
        answer.classList.toggle("no-answer", unanswered);
        stateLine.textContent = unanswered ? `no answer (${data.no_answer}); the reply is shown struck through` : "done";
        run.dataset.done = "true";
      } else if (event === "error") {
        stateLine.textContent = "failed: " + data.error;
      }
    });
  } catch (error) {
    stateLine.textContent = "failed: " + error.message;
  }
  if (!run.querySelector(".clues").children.length) {
    run.querySelector(".clues").replaceChildren(el("li", { class: "muted" }, "none (this mode writes no clues)"));
  }
}

async function ask(event) {
  event.preventDefault();
  const corpus = corpusName();
  const query = $("query").value.trim();
  if (!corpus || !query) return;
  const modes = [$("mode-a").value];
  if ($("compare").checked && $("mode-b").value !== modes[0]) modes.push($("mode-b").value);
  const runs = modes.map((mode) => {
    const run = $("run-template").content.firstElementChild.cloneNode(true);
    run.dataset.corpus = corpus;
    run.dataset.mode = mode;
    run.dataset.query = query;
    run.querySelector(".run-mode").textContent = mode;
    run.querySelector(".run-state").textContent = "queued";
    return run;
  });
  $("runs").replaceChildren(...runs);
  $("ask").disabled = true;
  try {
    for (const [index, run] of runs.entries()) await askOne(corpus, query, modes[index], run);
  } finally {
    $("ask").disabled = false;
  }
}

// ---- the source of a passage -------------------------------------------------------------------

function passageQuery(item, extra = {}) {
  return new URLSearchParams({ doc: item.doc_id, start: item.start_char, end: item.end_char, ...extra });
}

function markOpenPage(page) {
  for (const button of $("viewer-pages").querySelectorAll("button")) {
    const open = Number(button.dataset.page) === page;
    button.classList.toggle("current", open);
    if (open) button.setAttribute("aria-current", "page");
    else button.removeAttribute("aria-current");
  }
}

// Page `page` of a cited PDF: its image with the passage marked, and its text beside it (`context`: that
// page's text, when the caller has it). A page chosen while another is still loading wins.
async function showPage(corpus, item, page, context = null) {
  const image = $("page-image");
  const status = $("viewer-page-status");
  const asked = ++state.shownPage;
  markOpenPage(page);
  status.textContent = `rendering page ${page}…`;
  const query = passageQuery(item, { page,
    width: Math.min(1400, Math.max(400, Math.round($("viewer-page").clientWidth * devicePixelRatio))) });
  const [response, text] = await Promise.all([
    fetch(`/corpora/${encodeURIComponent(corpus)}/page?${query}`, { headers: headers(false) }),
    context ? Promise.resolve(context)
      : api(`/corpora/${encodeURIComponent(corpus)}/passage?${passageQuery(item, { page })}`).catch((error) => error),
  ]);
  if (asked !== state.shownPage) return;
  if (text instanceof Error) $("viewer-text").replaceChildren("cannot show the page's text: " + text.message);
  else showText(text);
  if (!response.ok) {
    status.textContent = (await failure(response)).message;
    return;
  }
  const marked = Number(response.headers.get("X-Marked-Boxes") || 0);
  const blob = await response.blob();
  if (asked !== state.shownPage) return;
  if (image.src) URL.revokeObjectURL(image.src);
  image.src = URL.createObjectURL(blob);
  image.alt = `page ${page} of ${item.doc_id}`;
  image.hidden = false;
  image.dataset.page = page;
  status.textContent = marked ? `page ${page}: the passage is marked (${marked} line(s))`
    : `page ${page}: the passage's text was not found on the page image; it is marked in the text below`;
}

function showText(context) {
  const text = context.text;
  const before = text.slice(0, context.mark_start);
  const passage = text.slice(context.mark_start, context.mark_end);
  const after = text.slice(context.mark_end);
  const heading = context.shown_page ? `Text of page ${context.shown_page}` :
    context.section.length ? `Section ${context.section.join(" › ")}` : "Text around the passage";
  $("viewer-text-heading").textContent = passage ? heading : `${heading} (the passage is not on it)`;
  $("viewer-text").dataset.page = context.shown_page || "";
  $("viewer-text").replaceChildren(before, ...(passage ? [el("mark", {}, passage)] : []), after);
  const mark = $("viewer-text").querySelector("mark");
  if (mark) mark.scrollIntoView({ block: "center" });
}

async function openSource(corpus, item) {
  const viewer = $("viewer");
  viewer.hidden = false;
  $("viewer-citation").textContent = item.citation || item.doc_id;
  $("page-image").hidden = true;
  viewer.classList.remove("with-page");
  $("viewer-pages").replaceChildren();
  $("viewer-page-status").textContent = "";
  $("viewer-text").replaceChildren("loading…");
  try {
    const context = await api(`/corpora/${encodeURIComponent(corpus)}/passage?${passageQuery(item)}`);
    state.shownPage += 1;  // a page of the source opened before this one is not shown over it
    showText(context);
    viewer.classList.toggle("with-page", context.page_images);
    if (context.page_images) {
      const pages = [];
      for (let page = context.page; page <= (context.last_page || context.page); page += 1) pages.push(page);
      $("viewer-pages").replaceChildren(...pages.map((page) =>
        el("button", { type: "button", data: { page }, onclick: () => showPage(corpus, item, page) }, `page ${page}`)));
      await showPage(corpus, item, context.page, context);
    } else if (context.pages) {
      $("viewer-page-status").textContent = "the PDF itself was not kept, so its page is shown as text";
    }
  } catch (error) {
    $("viewer-text").replaceChildren("cannot show the source: " + error.message);
  }
  viewer.scrollIntoView({ behavior: "smooth", block: "start" });
}

// ---- start ------------------------------------------------------------------------------------

async function start() {
  $("memorize").addEventListener("click", memorize);
  $("ask-form").addEventListener("submit", ask);
  $("viewer-close").addEventListener("click", () => { $("viewer").hidden = true; });
  $("corpus-name").addEventListener("input", () => { state.named = true; });
  $("corpus-name").addEventListener("change", () => { state.named = true; loadCorpora().catch(() => {}); });
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.key = $("api-key").value;
    sessionStorage.setItem("memorag-key", state.key);
    $("key-form").hidden = true;
    connect();
  });
  await connect();
}

async function connect() {
  try {
    await loadHealth();
    await loadCorpora({ offerFirst: true });
    document.body.dataset.ready = "true";
  } catch (error) {
    $("server-status").textContent = "cannot reach the server's API: " + error.message;
  }
}

start();
