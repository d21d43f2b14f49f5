// The explore page: asks the server's API for maps and shows them. No library, no network but the server.
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
let info = null;
let seed = null;          // the seed shown, in its command-line form
let stream = Math.random().toString(36).slice(2);   // this tab's requests: a newer one supersedes an older

function api(path, params) {
  const q = new URLSearchParams(params || {});
  q.set("token", token);
  return path + "?" + q.toString();
}

function showError(text) {
  const box = $("error");
  box.textContent = text || "";
  box.hidden = !text;
}

function mapParams(format) {
  return {seed: seed, method: $("method").value, sign: $("sign").value, reduce: $("reduce").value,
          format: format, stream: stream};
}

async function showMap() {
  if (seed === null) return;
  const asked = seed;   // a newer click may change `seed` while this one waits
  const started = performance.now();
  const response = await fetch(api("api/map", mapParams("rgba")));  // raw pixels: nothing to decode
  if (response.status === 409) return;            // superseded by a newer request of this tab
  if (!response.ok) {
    showError((await response.json()).error);
    return;
  }
  showError("");
  const [width, height] = response.headers.get("X-Map-Size").split("x").map(Number);
  const pixels = new ImageData(new Uint8ClampedArray(await response.arrayBuffer()), width, height);
  const canvas = $("map");
  canvas.width = width;
  canvas.height = height;
  canvas.getContext("2d").putImageData(pixels, 0, 0);
  const ms = performance.now() - started;
  drawRings(response.headers.get("X-Receptive-Field"));
  if ($("work").open) showWork();
  $("map-caption").textContent = `${$("method").value}, seed ${asked} (${response.headers.get("X-Map-Milliseconds")} ms on the server)`;
  $("download-npy").href = api("api/map", {...mapParams("npy"), seed: asked});
  $("download-png").href = api("api/map", {...mapParams("png"), seed: asked});
  canvas.dataset.seed = asked;
  canvas.dataset.ms = ms.toFixed(1);
  document.body.dataset.painted = String(Number(document.body.dataset.painted || 0) + 1);
}

function drawRings(header) {
  // the clicked pixel's centre and the radii holding 50% and 90% of its map's mass, in input pixels
  const svg = $("rings");
  svg.innerHTML = "";
  if (!header || !info) return;
  const field = JSON.parse(header);
  const scale = 322 / info.input_shape[2];
  const ns = "http://www.w3.org/2000/svg";
  for (const [radius, kind] of [[field.radius50, "inner"], [field.radius90, "outer"]]) {
    if (radius === null) continue;
    const circle = document.createElementNS(ns, "circle");
    circle.setAttribute("cx", (field.centre[1] + 0.5) * scale);
    circle.setAttribute("cy", (field.centre[0] + 0.5) * scale);
    circle.setAttribute("r", Math.max(radius, 0.5) * scale);
    circle.setAttribute("class", kind);
    svg.appendChild(circle);
  }
  svg.dataset.radii = JSON.stringify([field.radius50, field.radius90]);
}

async function showWork() {
  // the glass-box view: the graph the backward pass walked and what each node got and sent
  if (seed === null) return;
  const response = await fetch(api("api/work", {seed: seed}));
  const body = await response.json();
  $("graph").textContent = response.ok ? body.graph : body.error;
  $("steps").textContent = response.ok ? body.steps : "";
  $("work").dataset.seed = seed;
}

function channelSuffix() {
  const box = $("channel");
  return box.options.length > 1 ? "@" + box.value : "";
}

function setupDense(shape) {
  const [channels, rows, cols] = shape;
  const canvas = $("output");
  canvas.width = cols;
  canvas.height = rows;
  $("output-figure").hidden = false;
  if (channels > 1) {
    $("channel-box").hidden = false;
    for (let k = 0; k < channels; k++) $("channel").add(new Option(String(k), String(k)));
    if (info.task === "segmentation") {
      $("segment").hidden = false;
      $("segment").addEventListener("click", () => { seed = `segment:${$("channel").value}`; showMap(); });
    }
  }
  const out = new Image();
  out.onload = () => canvas.getContext("2d").drawImage(out, 0, 0, cols, rows);
  out.src = api("api/output.png");
  const mark = (r0, c0, r1, c1) => {
    // the seed's pixels outlined on the output
    const context = canvas.getContext("2d");
    context.drawImage(out, 0, 0, cols, rows);
    context.strokeStyle = "cyan";
    context.lineWidth = Math.max(0.5, cols / 256);
    const pad = r1 - r0 === 1 && c1 - c0 === 1 ? Math.max(1, cols / 64) : 0;  // a pixel: a box around it
    context.strokeRect(c0 - pad, r0 - pad, c1 - c0 + 2 * pad, r1 - r0 + 2 * pad);
  };
  let start = null;
  const cell = (event) => {
    const box = canvas.getBoundingClientRect();
    return [Math.min(rows - 1, Math.max(0, Math.floor((event.clientY - box.top) / box.height * rows))),
            Math.min(cols - 1, Math.max(0, Math.floor((event.clientX - box.left) / box.width * cols)))];
  };
  canvas.addEventListener("mousedown", (event) => { start = cell(event); });
  canvas.addEventListener("mouseup", (event) => {
    if (start === null) return;
    const end = cell(event);
    if (event.shiftKey && (end[0] !== start[0] || end[1] !== start[1])) {
      const r0 = Math.min(start[0], end[0]), c0 = Math.min(start[1], end[1]);
      const r1 = Math.max(start[0], end[0]) + 1, c1 = Math.max(start[1], end[1]) + 1;
      seed = `region:${r0},${c0},${r1},${c1}` + channelSuffix();
      mark(r0, c0, r1, c1);
    } else {
      seed = `pixel:${end[0]},${end[1]}` + channelSuffix();
      mark(end[0], end[1], end[0] + 1, end[1] + 1);
    }
    start = null;
    showMap();
  });
}

function setupClasses(top) {
  $("classes-figure").hidden = false;
  const list = $("classes");
  for (const entry of top) {
    const item = document.createElement("li");
    item.textContent = `${entry.name} ${(100 * entry.p).toFixed(1)}%`;
    item.dataset.class = entry.class;
    item.addEventListener("mouseenter", () => {
      for (const other of list.children) other.classList.remove("on");
      item.classList.add("on");
      seed = `class:${entry.class}`;
      showMap();
    });
    list.appendChild(item);
  }
  seed = `class:${top[0].class}`;
  // any other class, by name: its map from its own backward pass
  $("class-box").hidden = false;
  info.classes.forEach((name, k) => $("class-pick").add(new Option(`${k}: ${name}`, String(k))));
  $("class-pick").addEventListener("change", () => {
    if ($("class-pick").value === "") return;
    for (const other of list.children) other.classList.toggle("on", other.dataset.class === $("class-pick").value);
    seed = `class:${$("class-pick").value}`;
    showMap();
  });
}

async function start() {
  const response = await fetch(api("api/info"));
  if (!response.ok) {
    showError((await response.json()).error);
    return;
  }
  info = await response.json();
  if (info.store) await setupStore(info.store);
  if (!info.live) {
    $("why").textContent = info.why;
    $("why").hidden = false;
    document.body.dataset.ready = "1";
    return;
  }
  $("live").hidden = false;
  $("what").textContent = `${info.image}: ${info.task}, input ${info.input_shape.join("x")}, output ${info.output_shape.join("x")}`;
  for (const name of info.methods) $("method").add(new Option(name, name));
  $("image").src = api("api/image.png");
  $("under").src = $("image").src;
  $("opacity").addEventListener("input", () => { $("map").style.opacity = $("opacity").value; });
  if (info.top) setupClasses(info.top); else setupDense(info.output_shape);
  for (const id of ["method", "sign", "reduce", "channel"]) $(id).addEventListener("change", showMap);
  $("work").addEventListener("toggle", () => { if ($("work").open) showWork(); });
  $("pin").addEventListener("click", () => {
    // the shown map stays beside the next ones: two seeds, or two methods, side by side
    if (!$("map").dataset.seed) return;
    fetch($("download-png").href).then((r) => r.blob()).then((blob) => {
      $("pinned").src = URL.createObjectURL(blob);
      $("pinned-caption").textContent = $("map-caption").textContent;
      $("pinned-figure").hidden = false;
    });
  });
  if (info.store && info.index !== null) showStored(info.index);
  document.body.dataset.ready = "1";
  showMap();
}

// a store of maps: a table of its images, sorted by a column (kept in the URL's #sort=KEY:asc|desc)
let rows = [];

async function setupStore(summary) {
  const response = await fetch(api("api/store"));
  const body = await response.json();
  if (!response.ok) {
    showError(body.error);
    return;
  }
  rows = body.rows;
  $("store").hidden = false;
  $("store-title").textContent = `${summary.path}: ${summary.images} images, ${summary.method} maps, seed ${summary.seed}` +
    (summary.scored ? "" : " (no deletion and insertion scores: saliency evaluate writes them)");
  $("store-hint").textContent = "Click a heading to sort by it (again: the other way); click a row to " +
    (info.model ? "open its image live above, beside its stored map." : "see its image and stored map.");
  const head = $("store-table").tHead.rows[0];
  for (const column of summary.columns.concat([{key: "map", heading: "stored map", title: ""}])) {
    const cell = document.createElement("th");
    cell.textContent = column.heading;
    cell.title = column.title;
    cell.dataset.key = column.key;
    if (column.key !== "map") cell.addEventListener("click", () => sortBy(column.key));
    head.appendChild(cell);
  }
  const [key, way] = (new URLSearchParams(location.hash.slice(1)).get("sort") || "index:asc").split(":");
  sortBy(key, way);
}

function sortBy(key, way) {
  const table = $("store-table");
  const [oldKey, oldWay] = (table.dataset.sorted || ":").split(":");
  way = way || (key === oldKey && oldWay === "asc" ? "desc" : "asc");
  const sign = way === "asc" ? 1 : -1;
  rows.sort((a, b) => {
    const x = a[key], y = b[key];
    if (x === null || x === undefined) return (y === null || y === undefined) ? a.index - b.index : 1;
    if (y === null || y === undefined) return -1;   // rows without a value last, either way
    const order = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
    return sign * order || a.index - b.index;
  });
  table.dataset.sorted = `${key}:${way}`;
  history.replaceState(null, "", location.pathname + location.search + `#sort=${key}:${way}`);
  for (const cell of table.tHead.rows[0].cells) {
    cell.className = cell.dataset.key === key ? way : "";
  }
  const body = table.tBodies[0];
  body.innerHTML = "";
  for (const row of rows) body.appendChild(storeRow(row));
}

function storeRow(row) {
  const tr = document.createElement("tr");
  tr.dataset.index = row.index;
  if (info.live && row.index === info.index) tr.classList.add("on");
  const shown = (v) => v === null ? "" : typeof v === "number" && !Number.isInteger(v) ? v.toFixed(4) : String(v);
  for (const key of ["index", "file", "predicted", "error", "deletion", "insertion"]) {
    const cell = document.createElement("td");
    cell.textContent = shown(row[key]);
    cell.dataset.key = key;
    tr.appendChild(cell);
  }
  const cell = document.createElement("td");
  if (row.done) {
    const img = document.createElement("img");
    img.loading = "lazy";
    img.className = "thumb";
    img.alt = "";
    img.src = api("api/store/map", {index: row.index, format: "png"});
    cell.appendChild(img);
  }
  tr.appendChild(cell);
  tr.addEventListener("click", () => openRow(row));
  return tr;
}

function showStored(index) {
  const row = rows.find((r) => r.index === index);
  if (!row) return;
  $("stored").hidden = false;
  $("stored-image").src = api("api/store/image.png", {index: index});
  $("stored-map").src = api("api/store/map", {index: index, format: "png"});
  $("stored-name").textContent = row.file;
  $("stored-caption").textContent = `stored ${info.store.method} map, seed ${info.store.seed}`;
  $("stored").dataset.index = index;
}

async function openRow(row) {
  if (!row.done) {
    showError(`${row.file} has no map: ${row.error}`);
    return;
  }
  showError("");
  if (!info.model) {   // browsed only: no model to run
    showStored(row.index);
    return;
  }
  const response = await fetch(api("api/open", {index: row.index}), {method: "POST"});
  if (!response.ok) {
    showError((await response.json()).error);
    return;
  }
  location.reload();
}

// an image dropped on the page replaces the shown one (read as the model takes it, on the server)
async function upload(file) {
  if (!file) return;
  let response;
  try {
    response = await fetch(api("api/image"), {method: "POST", body: file});
  } catch (error) {
    showError(`the image could not be sent (${error.message})`);
    return;
  }
  if (!response.ok) {
    showError((await response.json()).error);
    return;
  }
  location.reload();
}
document.addEventListener("dragover", (event) => event.preventDefault());
document.addEventListener("drop", (event) => { event.preventDefault(); upload(event.dataTransfer.files[0]); });
$("upload").addEventListener("change", () => upload($("upload").files[0]));

start();
