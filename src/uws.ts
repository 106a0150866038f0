// Loads the native uWebSockets.js binary directly. The package silently falls back to a
// slow JS shim when the binary does not load; we refuse to start instead.
import { createRequire } from 'node:module';
import type * as UWS from 'uWebSockets.js';

const require = createRequire(import.meta.url);

function loadNative(): typeof UWS {
  const file = `uWebSockets.js/binaries/uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  try {
    return require(file) as typeof UWS;
  } catch (err) {
    throw new Error(
      `uWebSockets.js native binary did not load (${file}): ${(err as Error).message}. phonebridge will not run on the slow fallback.`,
      { cause: err },
    );
  }
}

export const uws = loadNative();
export type { HttpRequest, HttpResponse, TemplatedApp, WebSocket, us_listen_socket } from 'uWebSockets.js';
