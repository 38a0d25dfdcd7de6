// The Moldau console's only script of its own: draws a group's lag over time with uPlot from
// the JSON the live part of the group page carries (#lag-history: seconds since the epoch,
// #lag-values: the total lag at each), once on load and again after every htmx refresh.
(function () {
  "use strict";
  let chart = null;

  function readJson(id) {
    const element = document.getElementById(id);
    return element ? JSON.parse(element.textContent) : null;
  }

  function draw() {
    const container = document.getElementById("lag-chart");
    const times = readJson("lag-history");
    const values = readJson("lag-values");
    if (!container || !times || !values || typeof uPlot === "undefined") {
      return;
    }
    const data = [times, values];
    container.dataset.samples = String(times.length);
    if (chart) {
      chart.setData(data);
      return;
    }
    chart = new uPlot(
      {
        width: Math.max(container.clientWidth, 320),
        height: 220,
        scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
        series: [{}, { label: "total lag", stroke: "#2f6fb0", width: 2, fill: "rgba(47,111,176,0.08)" }],
        axes: [{}, { label: "records" }],
      },
      data,
      container,
    );
  }

  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("htmx:afterSettle", draw);
})();
