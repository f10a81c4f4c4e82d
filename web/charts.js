// charts.js — line charts with uPlot (served from the binary at /vendor/uplot.js, a global).
// Colours come from the page's CSS variables, so charts follow prefers-color-scheme; a chart
// follows its container's width. Each chart's element carries data-points (how many x values it
// holds) so that a page, and the browser test, can tell a chart with data from an empty one.

const PALETTE = ['#2f80ed', '#eb5757', '#27ae60', '#f2994a', '#9b51e0', '#56ccf2', '#bb6bd9',
  '#6fcf97', '#f2c94c', '#828282'];

export function color(i) { return PALETTE[i % PALETTE.length]; }

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

// lineChart(container, {title, series: [{label, color}], data: [xs, ys1, ys2, …], time: true,
// integerX (steps, epochs), yLabel, yFormat, yRange: [min, max] | null}) → {update(data), destroy()}.
export function lineChart(container, options) {
  const wrap = document.createElement('div');
  wrap.className = 'chart';
  if (options.title) {
    const title = document.createElement('div');
    title.className = 'chart-title';
    title.textContent = options.title;
    wrap.append(title);
  }
  const canvasHolder = document.createElement('div');
  wrap.append(canvasHolder);
  container.append(wrap);

  const fg = cssVar('--muted');
  const grid = cssVar('--grid');
  const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  // The holder's content width: the chart's own box less its padding.
  const width = () => Math.max(200, canvasHolder.clientWidth || container.clientWidth || 300);
  const opts = {
    width: width(),
    height: options.height || 170,
    scales: {
      x: { time: options.time !== false },
      y: options.yRange ? { range: options.yRange } : { auto: true },
    },
    legend: { show: options.series.length > 1 || options.legend === true },
    cursor: { drag: { x: false, y: false } },
    axes: [{ ...axis, incrs: options.integerX ? [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] : undefined }, { ...axis, label: options.yLabel, size: 56,
      values: options.yFormat ? (u, ticks) => ticks.map(options.yFormat) : undefined }],
    series: [{ label: options.xLabel || 'time' }].concat(options.series.map((s, i) => ({
      label: s.label,
      stroke: s.color || color(i),
      width: 2,
      spanGaps: true,
      points: { show: options.points ?? 'auto', size: 5 },
      value: options.yFormat ? (u, v) => (v === null || v === undefined ? '—' : options.yFormat(v)) : undefined,
    }))),
  };
  const empty = [[]].concat(options.series.map(() => []));
  const plot = new window.uPlot(opts, empty, canvasHolder);
  const onResize = () => plot.setSize({ width: width(), height: opts.height });
  window.addEventListener('resize', onResize);

  const chart = {
    plot,
    element: wrap,
    update(data) {
      plot.setData(data);
      wrap.dataset.points = String(data[0].length);
    },
    destroy() {
      window.removeEventListener('resize', onResize);
      plot.destroy();
      wrap.remove();
    },
  };
  chart.update(options.data || empty);
  // The first layout may come after the chart was made (a page building its DOM).
  requestAnimationFrame(onResize);
  return chart;
}
