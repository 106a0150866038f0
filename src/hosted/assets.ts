// The dashboard's only static files: a stylesheet and the optional countdown script (the page
// works without it: the expiry time is printed as text).
export const STYLE_CSS = `
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1b1f24; background: #f6f7f9; }
header { display: flex; justify-content: space-between; align-items: center; padding: 10px 24px; background: #1b1f24; color: #fff; }
header a.brand { color: #fff; font-weight: 600; text-decoration: none; }
header .signout span { margin-right: 10px; opacity: .8; }
main { max-width: 880px; margin: 0 auto; padding: 16px 24px 48px; }
section { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 12px 18px; margin: 16px 0; }
p.target { font-size: 17px; }
strong.host { font-family: ui-monospace, monospace; background: #fff4d6; padding: 1px 6px; border-radius: 4px; }
.badge { display: inline-block; font-size: 12px; padding: 0 6px; border-radius: 8px; background: #fde2e1; color: #8a1c1c; border: 1px solid #e9a9a7; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #eceff2; vertical-align: middle; }
button { font: inherit; padding: 5px 12px; border-radius: 6px; border: 1px solid #8a939c; background: #fff; cursor: pointer; }
button.primary { background: #1f6feb; border-color: #1f6feb; color: #fff; }
input[type=email], input[type=text] { font: inherit; padding: 5px 8px; border: 1px solid #8a939c; border-radius: 6px; }
.online { color: #1a7f37; font-weight: 600; } .offline { color: #8a939c; }
.secret { font-family: ui-monospace, monospace; background: #fff8c5; padding: 6px 10px; border-radius: 6px; word-break: break-all; }
.code { font-family: ui-monospace, monospace; font-size: 1.2em; letter-spacing: .05em; }
.qr { width: 240px; height: 240px; image-rendering: pixelated; }
.error { color: #cf222e; } .muted { color: #57606a; }
form.inline { display: inline; } fieldset { border: 0; padding: 0; margin: 8px 0; }
`;

export const COUNTDOWN_JS = `
for (const el of document.querySelectorAll('[data-expires]')) {
  const until = Date.parse(el.getAttribute('data-expires'));
  const tick = () => {
    const s = Math.max(0, Math.round((until - Date.now()) / 1000));
    el.textContent = s > 0 ? Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0') + ' left' : 'expired';
    if (s > 0) setTimeout(tick, 1000);
  };
  tick();
}
`;
