// A local OTLP/HTTP traces receiver for tests: POST /v1/traces in `http/json` or
// `http/protobuf`. The protobuf side is decoded here from the wire format of the OTLP trace
// messages (opentelemetry-proto: trace/v1/trace.proto, common/v1/common.proto), independent of
// the exporter under test.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type AttrValue = string | number | boolean | AttrValue[] | Record<string, unknown> | undefined;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  traceState: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, AttrValue>;
  events: Array<{ name: string; attributes: Record<string, AttrValue> }>;
  links: Array<{ traceId: string; spanId: string }>;
  status: { code: number; message: string };
  resource: Record<string, AttrValue>;
  scope: string;
  /** How it arrived. */
  encoding: 'json' | 'protobuf';
}

export const KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Raw request bodies as received (for "no secret anywhere" checks over the bytes). */
  bodies: Buffer[];
  contentTypes: string[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: Buffer[] = [];
  const contentTypes: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const type = String(req.headers['content-type'] ?? '');
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      try {
        if (req.headers['content-encoding'])
          throw new Error(`unexpected content-encoding ${req.headers['content-encoding']}`);
        if (type.startsWith('application/json')) spans.push(...fromJson(JSON.parse(body.toString('utf8'))));
        else if (type.startsWith('application/x-protobuf')) spans.push(...fromProtobuf(body));
        else throw new Error(`unexpected content-type ${type}`);
      } catch (err) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(String(err));
        return;
      }
      bodies.push(body);
      contentTypes.push(type);
      if (type.startsWith('application/json')) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    contentTypes,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

// --- OTLP/JSON -----------------------------------------------------------------------------------

type JsonAny = {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: JsonAny[] };
  kvlistValue?: { values?: JsonKv[] };
  bytesValue?: string;
};
type JsonKv = { key: string; value: JsonAny };

function jsonValue(v: JsonAny | undefined): AttrValue {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(jsonValue);
  if (v.kvlistValue) return jsonAttrs(v.kvlistValue.values);
  if (v.bytesValue !== undefined) return v.bytesValue;
  return undefined;
}

function jsonAttrs(kvs: JsonKv[] | undefined): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const kv of kvs ?? []) out[kv.key] = jsonValue(kv.value);
  return out;
}

function fromJson(req: any): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const resource = jsonAttrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          traceState: s.traceState ?? '',
          name: s.name,
          kind: s.kind,
          attributes: jsonAttrs(s.attributes),
          events: (s.events ?? []).map((e: any) => ({ name: e.name, attributes: jsonAttrs(e.attributes) })),
          links: (s.links ?? []).map((l: any) => ({ traceId: l.traceId, spanId: l.spanId })),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
          resource,
          scope: ss.scope?.name ?? '',
          encoding: 'json',
        });
      }
    }
  }
  return out;
}

// --- OTLP/protobuf -------------------------------------------------------------------------------

type Field = { no: number; wire: number; varint?: bigint; bytes?: Buffer };

function readVarint(b: Buffer, pos: { i: number }): bigint {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    if (pos.i >= b.length) throw new Error('truncated varint');
    const byte = b[pos.i++];
    result |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return result;
    shift += 7n;
  }
}

/** The fields of one message, in order (wire types 0, 1, 2 and 5). */
function fields(b: Buffer): Field[] {
  const out: Field[] = [];
  const pos = { i: 0 };
  while (pos.i < b.length) {
    const key = Number(readVarint(b, pos));
    const no = key >>> 3;
    const wire = key & 7;
    if (wire === 0) out.push({ no, wire, varint: readVarint(b, pos) });
    else if (wire === 1) {
      out.push({ no, wire, bytes: b.subarray(pos.i, pos.i + 8) });
      pos.i += 8;
    } else if (wire === 2) {
      const len = Number(readVarint(b, pos));
      out.push({ no, wire, bytes: b.subarray(pos.i, pos.i + len) });
      pos.i += len;
    } else if (wire === 5) {
      out.push({ no, wire, bytes: b.subarray(pos.i, pos.i + 4) });
      pos.i += 4;
    } else throw new Error(`unsupported wire type ${wire}`);
    if (pos.i > b.length) throw new Error('truncated field');
  }
  return out;
}

const all = (fs: Field[], no: number) => fs.filter((f) => f.no === no);
const one = (fs: Field[], no: number) => fs.find((f) => f.no === no);
const str = (f: Field | undefined) => f?.bytes?.toString('utf8') ?? '';
const hex = (f: Field | undefined) => f?.bytes?.toString('hex') ?? '';

/** AnyValue: string 1, bool 2, int64 3, double 4, array 5, kvlist 6, bytes 7. */
function pbValue(b: Buffer | undefined): AttrValue {
  if (!b) return undefined;
  const f = fields(b)[0];
  if (!f) return undefined;
  switch (f.no) {
    case 1:
      return str(f);
    case 2:
      return f.varint === 1n;
    case 3:
      return Number(BigInt.asIntN(64, f.varint!));
    case 4:
      return f.bytes!.readDoubleLE(0);
    case 5:
      return all(fields(f.bytes!), 1).map((v) => pbValue(v.bytes));
    case 6:
      return pbAttrs(all(fields(f.bytes!), 1));
    case 7:
      return f.bytes!.toString('base64');
    default:
      return undefined;
  }
}

/** KeyValue: key 1, value 2. */
function pbAttrs(kvs: Field[]): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const kv of kvs) {
    const fs = fields(kv.bytes!);
    out[str(one(fs, 1))] = pbValue(one(fs, 2)?.bytes);
  }
  return out;
}

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  // ExportTraceServiceRequest: resource_spans 1. ResourceSpans: resource 1, scope_spans 2.
  for (const rsf of all(fields(body), 1)) {
    const rs = fields(rsf.bytes!);
    const resourceFields = one(rs, 1)?.bytes;
    const resource = resourceFields ? pbAttrs(all(fields(resourceFields), 1)) : {};
    // ScopeSpans: scope 1 (InstrumentationScope: name 1), spans 2.
    for (const ssf of all(rs, 2)) {
      const ss = fields(ssf.bytes!);
      const scopeBytes = one(ss, 1)?.bytes;
      const scope = scopeBytes ? str(one(fields(scopeBytes), 1)) : '';
      // Span: trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6,
      // attributes 9, events 11 (name 2, attributes 3), links 13 (trace_id 1, span_id 2),
      // status 15 (message 2, code 3).
      for (const sf of all(ss, 2)) {
        const s = fields(sf.bytes!);
        const status = one(s, 15)?.bytes;
        const st = status ? fields(status) : [];
        out.push({
          traceId: hex(one(s, 1)),
          spanId: hex(one(s, 2)),
          parentSpanId: hex(one(s, 4)),
          traceState: str(one(s, 3)),
          name: str(one(s, 5)),
          kind: Number(one(s, 6)?.varint ?? 0n),
          attributes: pbAttrs(all(s, 9)),
          events: all(s, 11).map((e) => {
            const ef = fields(e.bytes!);
            return { name: str(one(ef, 2)), attributes: pbAttrs(all(ef, 3)) };
          }),
          links: all(s, 13).map((l) => {
            const lf = fields(l.bytes!);
            return { traceId: hex(one(lf, 1)), spanId: hex(one(lf, 2)) };
          }),
          status: { code: Number(one(st, 3)?.varint ?? 0n), message: str(one(st, 2)) },
          resource,
          scope,
          encoding: 'protobuf',
        });
      }
    }
  }
  return out;
}
