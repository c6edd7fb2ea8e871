// A small line chart drawn as inline SVG: one or more series of {t, v} points.
// The SVG carries data-latest (the last value of the first series) and data-sum (the
// sum over the window of each point's value times its interval), so a test or a
// curious reader can see what it shows without reading pixels.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const COLOURS = ["#3b6fd8", "#d8673b", "#2e9e6b", "#9b3bd8", "#c9a227", "#555"];

function svgElement(name, attributes) {
  const element = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  return element;
}

function formatValue(value) {
  if (value >= 1e6) return (value / 1e6).toFixed(1) + "M";
  if (value >= 1e3) return (value / 1e3).toFixed(1) + "k";
  return value >= 10 ? value.toFixed(0) : value.toFixed(1);
}

// series: [{name, points: [{t, v, seconds}]}]
function drawChart(svg, series, unit) {
  const width = 460, height = 160, left = 44, bottom = 18, top = 8;
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const all = series.flatMap((s) => s.points);
  const times = all.map((p) => p.t);
  const t0 = Math.min(...times), t1 = Math.max(...times);
  const peak = Math.max(1, ...all.map((p) => p.v));
  const x = (t) => left + (t1 > t0 ? ((t - t0) / (t1 - t0)) * (width - left - 4) : 0);
  const y = (v) => height - bottom - (v / peak) * (height - bottom - top);
  svg.append(svgElement("line", { class: "axis", x1: left, y1: height - bottom, x2: width, y2: height - bottom }));
  svg.append(svgElement("line", { class: "axis", x1: left, y1: top, x2: left, y2: height - bottom }));
  const label = svgElement("text", { x: 2, y: top + 8 });
  label.textContent = formatValue(peak) + " " + unit;
  svg.append(label);
  const zero = svgElement("text", { x: 2, y: height - bottom });
  zero.textContent = "0";
  svg.append(zero);
  const span = svgElement("text", { x: width - 4, y: top + 8, "text-anchor": "end" });
  span.textContent = t1 > t0 ? `last ${Math.round(t1 - t0)} s` : "";
  svg.append(span);
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const d = s.points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
    svg.append(svgElement("polyline", { class: "line", points: d, stroke: COLOURS[i % COLOURS.length] }));
    const name = svgElement("text", { x: left + 6 + i * 110, y: height - 4, fill: COLOURS[i % COLOURS.length] });
    name.textContent = s.name;
    svg.append(name);
  });
  const first = series[0] ? series[0].points : [];
  svg.dataset.latest = first.length ? first[first.length - 1].v : 0;
  svg.dataset.sum = Math.round(first.reduce((sum, p) => sum + p.v * p.seconds, 0));
  svg.dataset.samples = first.length;
}
