// The tab's CSS, injected as one <style> element (TensorBoard's CSP allows inline styles, not scripts).
export const STYLE = `
:root { color-scheme: light; }
body { margin: 0; font: 13px/1.45 Roboto, "Helvetica Neue", Arial, sans-serif; color: #212121; background: #f5f6f7; }
.attn-app { max-width: 1400px; margin: 0 auto; padding: 0 16px 40px; }
.attn-header { position: sticky; top: 0; z-index: 5; background: #f5f6f7; padding: 10px 0 0; border-bottom: 1px solid #ddd; }
.attn-pickers { display: flex; flex-wrap: wrap; gap: 14px; align-items: center; }
.attn-pickers label.dim { opacity: .5; }
.attn-title { font-size: 16px; font-weight: 500; margin-right: 8px; }
select, input[type=search] { font: inherit; padding: 3px 6px; border: 1px solid #bbb; border-radius: 4px; background: #fff; max-width: 420px; }
input[type=search] { width: 360px; }
.attn-tabs { display: flex; gap: 2px; margin-top: 8px; }
.attn-tabs button { font: inherit; border: 0; background: none; padding: 8px 14px; cursor: pointer; color: #555; border-bottom: 3px solid transparent; }
.attn-tabs button.on { color: #e65100; border-bottom-color: #f57c00; font-weight: 500; }
.attn-tabs button:hover { background: #eceff1; }
h2 { font-size: 18px; font-weight: 500; margin: 18px 0 10px; }
h2 .sub { font-size: 13px; color: #757575; font-weight: 400; margin-left: 6px; }
h3 { font-size: 14px; font-weight: 500; margin: 18px 0 8px; }
h4 { font-size: 13px; font-weight: 500; margin: 12px 0 6px; }
.step-bar { display: flex; height: 28px; border: 1px solid #bdbdbd; border-radius: 4px; overflow: hidden; margin: 6px 0 10px; }
.step-seg { height: 100%; min-width: 0; }
.limit { font-size: 15px; font-weight: 500; background: #fff8e1; border-left: 4px solid #f28e2b; padding: 8px 12px; margin: 8px 0 12px; }
.step-notes { color: #424242; font-size: 13px; margin: 6px 0; }
.host-line { color: #424242; font-size: 13px; }
tr.spread td { color: #616161; font-style: italic; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(220px, 1fr)); gap: 10px; }
.card { background: #fff; border: 1px solid #e0e0e0; border-radius: 6px; padding: 10px 12px; }
.card-title { color: #757575; font-size: 12px; }
.card-value { font-size: 20px; font-weight: 500; margin: 2px 0; word-break: break-word; }
.card-detail { color: #616161; font-size: 12px; }
.badges { display: flex; flex-direction: column; gap: 6px; }
.badge-row { display: flex; gap: 8px; align-items: center; }
.layer-type { min-width: 180px; font-family: "Roboto Mono", Menlo, monospace; font-size: 12px; }
.badge { display: inline-flex; gap: 6px; align-items: center; border-radius: 10px; padding: 1px 9px; font-size: 12px; font-weight: 500; border: 1px solid; margin-right: 4px; white-space: nowrap; }
.badge-extra { font-weight: 400; opacity: .8; }
.badge-fused { background: #e8f5e9; color: #1b5e20; border-color: #81c784; }
.badge-math { background: #ffebee; color: #b71c1c; border-color: #e57373; }
.badge-eager { background: #fff3e0; color: #bf360c; border-color: #ffb74d; }
.badge-compiled { background: #e3f2fd; color: #0d47a1; border-color: #64b5f6; }
.badge-unknown { background: #f5f5f5; color: #424242; border-color: #bdbdbd; }
.verdicts { list-style: none; padding: 0; margin: 0; display: flex; flex-direction: column; gap: 6px; }
.verdict { display: flex; gap: 10px; align-items: flex-start; background: #fff; border: 1px solid #e0e0e0; border-left: 4px solid #90a4ae; border-radius: 4px; padding: 7px 10px; }
.verdict-warn { border-left-color: #f57c00; }
.verdict-error { border-left-color: #d32f2f; }
.sev { display: inline-flex; width: 18px; height: 18px; border-radius: 9px; align-items: center; justify-content: center; font-weight: 700; font-size: 11px; color: #fff; background: #90a4ae; flex: none; }
.verdict-warn .sev { background: #f57c00; }
.verdict-error .sev { background: #d32f2f; }
.chart { width: 100%; height: 380px; background: #fff; border: 1px solid #e0e0e0; border-radius: 6px; }
.chart-short { height: 150px; }
.chart-tall { height: 440px; }
.chart-pair { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
@media (max-width: 900px) { .chart-pair { grid-template-columns: 1fr; } }
table.grid { border-collapse: collapse; background: #fff; border: 1px solid #e0e0e0; margin: 6px 0; font-size: 12px; max-width: 100%; }
table.grid th, table.grid td { padding: 4px 10px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
table.grid th { background: #fafafa; font-weight: 500; color: #424242; white-space: nowrap; }
table.grid .num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.grid tr.group td { background: #f7f9fb; font-weight: 500; border-top: 1px solid #ddd; }
table.kernels { width: 100%; }
th.sortable { cursor: pointer; user-select: none; }
th.sortable.asc::after { content: " ▲"; font-size: 9px; }
th.sortable.desc::after { content: " ▼"; font-size: 9px; }
td.better { color: #2e7d32; } td.worse { color: #c62828; }
.kcell { font-family: "Roboto Mono", Menlo, monospace; font-size: 11.5px; word-break: break-all; }
.kname summary { cursor: pointer; }
.kname-full { color: #555; margin: 4px 0 2px 14px; white-space: pre-wrap; word-break: break-all; }
.fingerprint { font-family: Roboto, sans-serif; font-size: 11px; color: #5f6368; word-break: normal; }
.impl-tag { margin-left: 8px; font-family: inherit; color: #2e7d32; font-size: 11px; }
.attn-dot { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
.stage-chip { white-space: nowrap; }
.controls { display: flex; gap: 16px; align-items: center; flex-wrap: wrap; margin: 6px 0 10px; }
.toggle { display: inline-flex; align-items: center; gap: 0; }
.toggle-label { margin-right: 8px; color: #616161; }
.toggle button { font: inherit; border: 1px solid #bbb; background: #fff; padding: 3px 12px; cursor: pointer; }
.toggle button + button { border-left: 0; }
.toggle button:first-of-type { border-radius: 4px 0 0 4px; } .toggle button:last-of-type { border-radius: 0 4px 4px 0; }
.toggle button.on { background: #f57c00; color: #fff; border-color: #f57c00; }
.toggle button:disabled { color: #aaa; cursor: not-allowed; }
.hint { color: #757575; font-size: 12px; margin: 4px 0; }
.hint.err { color: #c62828; }
.notice { border-radius: 6px; padding: 14px 16px; margin: 14px 0; background: #fff; border: 1px solid #e0e0e0; }
.notice-title { font-weight: 500; font-size: 14px; }
.notice-detail { color: #616161; margin-top: 4px; white-space: pre-wrap; word-break: break-word; }
.notice-loading .notice-title::before { content: ""; display: inline-block; width: 10px; height: 10px; margin-right: 8px; border-radius: 50%; border: 2px solid #f57c00; border-right-color: transparent; animation: attn-spin .8s linear infinite; vertical-align: -1px; }
@keyframes attn-spin { to { transform: rotate(360deg); } }
.notice-error { border-color: #ef9a9a; background: #fff5f5; }
.notice-empty { border-style: dashed; }
.notice-unknown { border-color: #ffcc80; background: #fffaf2; }
.notice-unknown pre.toml { background: #fff; border: 1px solid #eee; padding: 8px; overflow-x: auto; font-size: 12px; }
.annotated { margin: 8px 0 0; color: #616161; }
.reading { background: #fff; border: 1px solid #c5cae9; border-radius: 6px; padding: 4px 14px 10px; margin-top: 14px; }
.reading h3 .sub { font-weight: normal; color: #5f6368; margin-left: 6px; }
.reading h4 { margin: 12px 0 4px; }
.reading-headline { font-size: 14px; margin: 4px 0; }
.reading-unknown { color: #6d4c41; font-style: italic; margin: 4px 0; }
.reading-cost { white-space: nowrap; }
.reading-fields { display: grid; grid-template-columns: max-content 1fr; gap: 0 8px; margin: 0; font-size: 11px; }
.reading-fields dt { color: #757575; }
.reading-fields dd { margin: 0; }
.reading-flag { color: #c62828; font-size: 11px; }
.claim { cursor: pointer; }
.claim:hover, .claim:focus { outline: 1px dashed #3f51b5; }
.claim[data-picked] { outline: 2px solid #d50000; background: #fff3e0; }
[data-claim-hit] { background: #ffe0b2 !important; box-shadow: inset 3px 0 #d50000; }
.claim-status { font-weight: 500; color: #3f51b5; }
.reading-tag { display: inline-block; font-size: 11px; background: #e8eaf6; border-radius: 3px; padding: 0 5px; margin: 2px 4px 2px 0; }
.reading-backends { margin: 4px 0; padding-left: 18px; }
.reading-phase-table tr[data-own] { background: #e8eaf6; }
.reading-phase-extras { margin: 0; padding-left: 14px; }
.verdict-hostbound { color: #c62828; }
.verdict-GPUbound { color: #2e7d32; }
.layer-detail { background: #fff; border: 1px solid #ffcc80; border-radius: 6px; padding: 4px 14px 10px; margin-top: 10px; }
.layer-detail-head { display: flex; align-items: center; gap: 10px; }
.layer-detail-head h3 { margin: 10px 0; }
button.link { border: 0; background: none; color: #1565c0; cursor: pointer; font: inherit; padding: 0 4px; }
.facts { display: flex; flex-wrap: wrap; gap: 6px 16px; margin: 6px 0; align-items: center; }
.fact-k { color: #757575; margin-right: 5px; }
.fact-v { font-weight: 500; }
details.numbers { margin-top: 10px; }
details.numbers > summary { cursor: pointer; color: #1565c0; }
.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; }
.meta dt { color: #757575; } .meta dd { margin: 0; }
.headlines { background: #fff; border: 1px solid #e0e0e0; border-left: 4px solid #f57c00; border-radius: 4px; padding: 8px 12px; margin: 10px 0; }
.headline { font-size: 15px; font-weight: 500; margin: 2px 0; }
.backend-summary { color: #616161; margin-top: 4px; }
.run-picker { display: flex; flex-direction: column; gap: 4px; background: #fff; border: 1px solid #e0e0e0; border-radius: 6px; padding: 8px 12px; }
.pick { display: flex; align-items: center; gap: 8px; cursor: pointer; }
.pick.on .pick-name { font-weight: 500; }
.pick-order { font-size: 11px; background: #f57c00; color: #fff; border-radius: 8px; padding: 0 6px; }
.only-in { display: grid; grid-template-columns: repeat(auto-fit, minmax(380px, 1fr)); gap: 12px; }
.absent { color: #9e9e9e; font-style: italic; }
.exponents { padding-left: 18px; }
.legend-row { display: flex; flex-wrap: wrap; gap: 12px; margin: 6px 0; }
.attn-tip { max-width: 520px; white-space: normal; word-break: break-all; font-size: 12px; }
.attn-tip-title { font-weight: 500; margin-bottom: 3px; }
.attn-tip-key { color: #757575; }
.heatmap tr.clickable { cursor: pointer; }
.heatmap tr.clickable:hover td, .heatmap tr.clickable:focus td { outline: 1px solid #f57c00; }
.heatmap tr.slowest td:first-child { font-weight: 500; color: #c62828; }
.headline.warn { color: #c62828; font-size: 14px; }
p.warn { color: #c62828; }
.rank-compare .pickers { margin: 6px 0; }
.chart-tall { height: 460px; }
table.grid tr.sub td { color: #616161; font-size: 12px; }
table.grid tr.total td { font-weight: 500; border-top: 2px solid #ccc; }
td.bar-cell { width: 280px; }
.bar { display: inline-block; height: 10px; border-radius: 2px; min-width: 1px; }
.bar-better { background: #59a14f; }
.bar-worse { background: #e15759; }
.roofline-compare { margin-top: 8px; }
.sweep-best td { min-width: 96px; } .sweep-best td.none { color: #9e9e9e; font-style: italic; }
.best-name { font-weight: 500; }
td.status-oom { color: #c62828; } td.status-unsupported, td.status-error { color: #9e9e9e; }
`;
