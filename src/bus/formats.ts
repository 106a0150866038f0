// Every message on the bus and every record in Redis has a format version, and this file is
// where all of them are numbered and read (docs/decisions/0200-bus-and-record-format-versions.md).
//
// The rule: release N reads the formats of release N-1 and writes formats N-1 can read
// (expand, then contract). A message or record with no version is version 1, the format of
// the releases before versions were written. Where a format has room for a field (JSON, a
// hash) the version is written in it (`v`); where it has none (a tagged line, a bare id or
// number), the shape is version 1 and any later format starts with `v<N>\n`, which release N-1
// cannot read: such a change is a two-release dance (N reads both, N+1 writes the new one) or
// new key and channel names.
//
// Readers accept every version from `minRead` up (a newer writer promised to stay readable)
// and refuse older ones with UnreadableFormatError: that older writer's release is no longer
// supported in a mixed cluster.
import { type Buffer } from 'node:buffer';
import { integerAt, runAt, runOf } from '../protocol/json-bytes.ts';
import { bufferSpan } from '../protocol/byte-calls.ts';
import { readReqHeader, reqLineEnd, writeReqHeaderLine, type ReqHeader } from './req-header.ts';
import { NumberedLine } from './numbered-line.ts';

/** One format: the version this release writes, and the oldest it still reads. */
export interface FormatVersion {
  readonly write: number;
  readonly minRead: number;
}

/**
 * The single table of format versions. Bump `write` only with a fixture of the old format
 * under test/fixtures/formats/ and a reader for it; raise `minRead` only once no supported
 * release writes the older version.
 */
export const FORMATS = {
  /** Node channel messages `m` + JSON header line + payload (src/gateway/node-messages.ts): `v` in the header. */
  nodeMessage: { write: 1, minRead: 1 },
  /** Supersede notices `s<epoch> <deviceId>` on a node channel (scripts.ts): by shape. */
  supersede: { write: 1, minRead: 1 },
  /** Control events on ch:control (JSON): `v` in the event. */
  control: { write: 1, minRead: 1 },
  /** Device channel messages: the phone's frame as is (by shape: a JSON object). */
  deviceFrame: { write: 1, minRead: 1 },
  /** Session hash `sess:<id>`: `v` in its `rec` JSON. */
  session: { write: 1, minRead: 1 },
  /** Ownership record `dev:<id>` {node, epoch}: hash field `v`. */
  owner: { write: 1, minRead: 1 },
  /** Replay list entries `seq\nstreamId\ndata`: by shape. */
  replayEntry: { write: 1, minRead: 1 },
  /**
   * Node liveness: `nodes` zset (deadline) + `boots` hash value `<boot>` or `<boot>.v<N>`, and
   * (added within version 1; a release without it is waited for a bounded time, 0245) `beats`
   * hash: when each node last renewed itself, in Redis' milliseconds.
   */
  liveness: { write: 1, minRead: 1 },
} as const satisfies Record<string, FormatVersion>;

export type FormatName = keyof typeof FORMATS;

/** A message or record in a format this release no longer reads (or not one of ours at all). */
export class UnreadableFormatError extends Error {
  override name = 'UnreadableFormatError';
  constructor(
    readonly format: FormatName,
    readonly version: number | undefined,
    why?: string,
  ) {
    super(
      version === undefined
        ? `malformed ${format} record${why ? `: ${why}` : ''}`
        : `${format} format version ${version} is older than this release reads (${FORMATS[format].minRead})`,
    );
  }
}

/** The version a value carries (absent: 1), checked against what this release reads. */
export function checkVersion(format: FormatName, v: unknown): number {
  if (v === undefined || v === null) v = 1;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1)
    throw new UnreadableFormatError(format, undefined, `version ${JSON.stringify(v)}`);
  if (v < FORMATS[format].minRead) throw new UnreadableFormatError(format, v);
  return v;
}

const NL = 0x0a;
const CLOSE_BRACE = 0x7d;

// --- node channel messages --------------------------------------------------------------------

/** `{"v":N,` — spliced into a header's JSON (no copy of the header object on the hot path). */
const NODE_HEAD = `{"v":${FORMATS.nodeMessage.write},`;

/** A node message header as one JSON line, version first; `h` must be a non-empty object. */
export function nodeHeaderLine(h: object): string {
  return `${NODE_HEAD}${JSON.stringify(h).slice(1)}\n`;
}

/** nodeHeaderLine of a request's header, written without JSON.stringify (src/bus/req-header.ts). */
export function reqHeaderLine(h: ReqHeader): string {
  return writeReqHeaderLine(NODE_HEAD, h);
}

/** A node message: its header line, then the payload (a phone frame travels unescaped). */
export function encodeNodeMessage(h: object, payload = ''): string {
  return nodeHeaderLine(h) + payload;
}

/**
 * The header line of `{ t, rid }`, the answers' and bounces' whole header, written without
 * JSON.stringify: the same bytes as `nodeHeaderLine({ t, rid })` for a type that needs no
 * escaping and an integer `rid`.
 */
export function ridHeaderLine(t: 'res' | 'rel' | 'unheard', rid: number): string {
  return `${NODE_HEAD}"t":"${t}","rid":${rid}}\n`;
}

/** ridHeaderLine's texts around its rid, by type: kept, so that a writer keeps their bytes. */
const RID_TEXTS = {
  res: [`${NODE_HEAD}"t":"res","rid":`, '}\n'],
  rel: [`${NODE_HEAD}"t":"rel","rid":`, '}\n'],
  unheard: [`${NODE_HEAD}"t":"unheard","rid":`, '}\n'],
} as const;

/**
 * ridHeaderLine(t, rid) as a NumberedLine, for a bus that writes bytes: it writes the line
 * without making the string, which costs a concatenation, its flattening and a call into the
 * runtime to encode it, some 1.3 thousand instructions a message
 * (docs/decisions/0263-header-lines-written-as-bytes.md).
 */
export function ridHead(t: 'res' | 'rel' | 'unheard', rid: number): NumberedLine {
  return new NumberedLine(RID_TEXTS[t], [rid]);
}

/** A node message's header line: as text, or a NumberedLine whose String() is the text. */
export type NodeHead = string | NumberedLine;

export interface NodeMessage<H> {
  header: H & { v?: number };
  /** A view of the message after the header line (no copy). */
  payload: Buffer;
}

/**
 * Reads the node message raw[start, end) (without the bus's `m` tag; the whole of `raw` by
 * default). Throws UnreadableFormatError on a header that is not a JSON object with a string
 * `t`, or of a version this release no longer reads.
 */
export function decodeNodeMessage<H extends { t: string }>(raw: Buffer, start = 0, end = raw.length): NodeMessage<H> {
  const rid = ridHeader(raw, start, end);
  if (rid) return { header: rid as unknown as H & { v?: number }, payload: bufferSpan(raw, ridLineEnd + 1, end) };
  // The request's header is read up to its line's end, found by the reader (reqLineEnd).
  const short =
    end - start > NODE_HEAD_RUN.length && runAt(raw, start, NODE_HEAD_RUN)
      ? readReqHeader(raw, start + NODE_HEAD_RUN.length, end, FORMATS.nodeMessage.write)
      : undefined;
  if (short) return { header: short as unknown as H & { v?: number }, payload: bufferSpan(raw, reqLineEnd + 1, end) };
  let nl = raw.indexOf(NL, start);
  if (nl >= end) nl = -1;
  let h: H & { v?: number };
  try {
    h = JSON.parse(raw.toString('utf8', start, nl < 0 ? end : nl)) as H & { v?: number };
  } catch {
    throw new UnreadableFormatError('nodeMessage', undefined, 'header is not JSON');
  }
  if (typeof h !== 'object' || h === null || typeof h.t !== 'string')
    throw new UnreadableFormatError('nodeMessage', undefined, 'header has no type');
  checkVersion('nodeMessage', h.v);
  return { header: h, payload: bufferSpan(raw, nl < 0 ? end : nl + 1, end) };
}

const NODE_HEAD_RUN = runOf(NODE_HEAD);

/** `{"v":<this release's version>,"t":"` */
const RID_HEAD = runOf(`${NODE_HEAD}"t":"`);
const RID_TYPES = ['res', 'rel', 'unheard'] as const;
const RID_TYPE_RUNS = RID_TYPES.map((t) => runOf(`${t}","rid":`));

/** Where the line of the header ridHeader last read ends (its `\n`). */
let ridLineEnd = 0;

/**
 * The header at the start of raw[start, end) if it is exactly what ridHeaderLine writes (what
 * most messages are), read without JSON.parse and without a search for its line's end (a call
 * into the runtime): the line ends at the first `}`, which must be followed by `\n` (its end
 * then in ridLineEnd); undefined for any other header, which JSON.parse then reads.
 */
function ridHeader(
  raw: Buffer,
  start: number,
  end: number,
): { v: number; t: (typeof RID_TYPES)[number]; rid: number } | undefined {
  if (end - start < RID_HEAD.length + 14 || !runAt(raw, start, RID_HEAD)) return undefined;
  let i = start + RID_HEAD.length;
  // `req"`: a request's header (most of what a phone's node reads) is none of these.
  if (raw[i + 2] === 0x71) return undefined;
  let type = 0;
  while (type < RID_TYPES.length && (i + RID_TYPE_RUNS[type].length > end || !runAt(raw, i, RID_TYPE_RUNS[type])))
    type++;
  if (type === RID_TYPES.length) return undefined;
  i += RID_TYPE_RUNS[type].length;
  let close = i;
  const last = Math.min(end - 1, start + 64);
  while (close < last && raw[close] !== CLOSE_BRACE) close++;
  if (close === last || raw[close + 1] !== NL) return undefined;
  // An integer as JSON writes one (anything else is JSON.parse's to read).
  const rid = integerAt(raw, i, close);
  if (Number.isNaN(rid)) return undefined;
  ridLineEnd = close + 1;
  return { v: FORMATS.nodeMessage.write, t: RID_TYPES[type], rid };
}

// --- supersede notices ------------------------------------------------------------------------

/** `s<epoch> <deviceId>`, as the claim scripts publish it (scripts.ts; version 1 by shape). */
export function decodeSupersede(msg: string): { deviceId: string; epoch: number } {
  const sp = msg.indexOf(' ');
  const epoch = Number(msg.slice(1, sp));
  if (msg[0] !== 's' || sp < 2 || !Number.isInteger(epoch) || sp === msg.length - 1)
    throw new UnreadableFormatError('supersede', undefined, 'not s<epoch> <deviceId>');
  return { deviceId: msg.slice(sp + 1), epoch };
}

// --- control events ---------------------------------------------------------------------------

export function encodeControl(event: { type: string }): string {
  return JSON.stringify({ v: FORMATS.control.write, ...event });
}

/** The event without its version field. */
export function decodeControl<E extends { type: string }>(msg: string): E {
  let o: (E & { v?: number }) | null;
  try {
    o = JSON.parse(msg) as E & { v?: number };
  } catch {
    throw new UnreadableFormatError('control', undefined, 'not JSON');
  }
  if (typeof o !== 'object' || o === null || typeof o.type !== 'string')
    throw new UnreadableFormatError('control', undefined, 'no type');
  checkVersion('control', o.v);
  const { v: _v, ...event } = o;
  return event as unknown as E;
}

// --- device channel ---------------------------------------------------------------------------

/** Version 1 is the frame itself: release N-1 forwards what it reads to clients as it is. */
export function encodeDeviceFrame(frame: string): string {
  return frame;
}

/** A later format would start `v<N>\n`; a phone frame is JSON and never starts with `v`. */
export function decodeDeviceFrame(msg: string): string {
  if (msg.startsWith('v')) {
    const m = /^v(\d{1,6})\n/.exec(msg);
    checkVersion('deviceFrame', m ? Number(m[1]) : NaN);
    return msg.slice(m![0].length);
  }
  return msg;
}

// --- session records --------------------------------------------------------------------------

export function encodeSession(rec: object): string {
  return JSON.stringify({ v: FORMATS.session.write, ...rec });
}

/** The stored `rec` of a session hash, without its version field. */
export function decodeSession<S extends { id: string }>(json: string): S {
  let o: (S & { v?: number }) | null;
  try {
    o = JSON.parse(json) as S & { v?: number };
  } catch {
    throw new UnreadableFormatError('session', undefined, 'not JSON');
  }
  if (typeof o !== 'object' || o === null || typeof o.id !== 'string')
    throw new UnreadableFormatError('session', undefined, 'no id');
  checkVersion('session', o.v);
  // A copy without `v`, not `delete o.v`: deleting a member other than the last one written
  // leaves the object in dictionary mode, and every read of a session's fields on the request
  // path then goes through the generic load IC
  // (docs/decisions/0260-reads-the-optimizer-left-generic.md).
  const { v: _version, ...rec } = o;
  return rec as unknown as S;
}

// --- ownership records ------------------------------------------------------------------------

/** The `owner` script's reply {node, epoch, v} (v absent on records older releases wrote). */
export function decodeOwner(r: unknown): { nodeId: string; epoch: number } | undefined {
  if (r == null) return undefined;
  const [node, epoch, v] = r as [string | null, string | null, string | null];
  const e = Number(epoch);
  if (node == null || !Number.isInteger(e)) throw new UnreadableFormatError('owner', undefined, 'no node or epoch');
  checkVersion('owner', v == null ? undefined : Number(v));
  return { nodeId: String(node), epoch: e };
}

// --- replay list entries ----------------------------------------------------------------------

/** `seq\nstreamId\ndata` (version 1 by shape: it starts with a digit). */
export function decodeReplayEntry(e: string): { seq: number; streamId: string; data: string } {
  if (e.startsWith('v')) {
    const m = /^v(\d{1,6})\n/.exec(e);
    checkVersion('replayEntry', m ? Number(m[1]) : NaN);
    throw new UnreadableFormatError('replayEntry', undefined, 'no reader for a later entry format yet');
  }
  const a = e.indexOf('\n');
  const b = e.indexOf('\n', a + 1);
  const seq = Number(e.slice(0, a));
  if (a < 1 || b < 0 || !Number.isInteger(seq))
    throw new UnreadableFormatError('replayEntry', undefined, 'not seq\\nstreamId\\ndata');
  return { seq, streamId: e.slice(a + 1, b), data: e.slice(b + 1) };
}

// --- liveness ---------------------------------------------------------------------------------

/** The `boots` value a node announces: its boot id and the liveness format it writes. */
export function bootRecord(boot: string): string {
  return `${boot}.v${FORMATS.liveness.write}`;
}

/** A `boots` value: `<boot>` (version 1, before versions were written) or `<boot>.v<N>`. */
export function decodeBoot(value: string): { boot: string; v: number } {
  const m = /^(.*)\.v(\d{1,6})$/s.exec(value);
  const v = checkVersion('liveness', m ? Number(m[2]) : undefined);
  return { boot: m ? m[1] : value, v };
}
