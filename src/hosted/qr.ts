// The pairing QR as an SVG image, drawn from the QR encoder that ships inside qrcode-terminal
// (already a dependency for `phonebridge pair`), so the dashboard needs no image library.
import { Buffer } from 'node:buffer';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
interface QrMatrix {
  addData(data: string): void;
  make(): void;
  getModuleCount(): number;
  isDark(row: number, col: number): boolean;
}
const QRCode = require('qrcode-terminal/vendor/QRCode/index.js') as new (type: number, level: number) => QrMatrix;
const Level = require('qrcode-terminal/vendor/QRCode/QRErrorCorrectLevel.js') as Record<'L' | 'M' | 'Q' | 'H', number>;

/** An SVG document (black modules on white, four modules of quiet zone). */
export function qrSvg(text: string): string {
  const qr = new QRCode(-1, Level.M);
  qr.addData(text);
  qr.make();
  const n = qr.getModuleCount();
  const quiet = 4;
  let path = '';
  for (let r = 0; r < n; r++)
    for (let c = 0; c < n; c++) if (qr.isDark(r, c)) path += `M${c + quiet} ${r + quiet}h1v1h-1z`;
  const size = n + 2 * quiet;
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${size} ${size}" shape-rendering="crispEdges">` +
    `<rect width="${size}" height="${size}" fill="#fff"/><path d="${path}" fill="#000"/></svg>`
  );
}

export function qrDataUri(text: string): string {
  return `data:image/svg+xml;base64,${Buffer.from(qrSvg(text)).toString('base64')}`;
}
