// The Moldau console's only script of its own: draws a group's lag over time with uPlot from
// the JSON the live part of the group page carries (#lag-history's data-times: seconds since
// the epoch, data-values: the total lag at each), on load and again after every htmx refresh.
(function () {
  "use strict";
  let chart = null;

  function draw() {
    const container = document.getElementById("lag-chart");
    const history = document.getElementById("lag-history");
    if (!container || !history || typeof uPlot === "undefined") {
      return;
    }
    const times = JSON.parse(history.dataset.times);
    const values = JSON.parse(history.dataset.values);
    const data = [times, values];
    container.dataset.samples = String(times.length);
    if (chart) {
      chart.setData(data);
      return;
    }
    chart = new uPlot(
      {
        width: Math.max(container.clientWidth - 20, 300),
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
