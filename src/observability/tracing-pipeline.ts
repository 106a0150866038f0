// The trace pipeline: OTEL_* variables → sampler, resource, batch processor and OTLP exporter
// (docs/decisions/0110-tracing-off-by-default-explicit-context.md). It holds everything of the
// OpenTelemetry SDK, loaded only where tracing is on: by tracing.ts for the relay, by the
// reference phone (src/device/agent/tracing.ts).
import process from 'node:process';
import { readFileSync } from 'node:fs';
import type { Tracer } from '@opentelemetry/api';
import { parseKeyPairsIntoRecord } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { nonEmpty, tracesEndpoint, TracingConfigError, type Env } from './tracing-endpoint.ts';

export type OtlpProtocol = 'http/protobuf' | 'http/json';

export interface TracingConfig {
  /** The traces endpoint, with its path (`…/v1/traces`). */
  url: string;
  protocol: OtlpProtocol;
  serviceName: string;
  resource: Record<string, string>;
  sampler: Sampler;
  headers: Record<string, string>;
  timeoutMillis?: number;
  batch: {
    scheduledDelayMillis?: number;
    maxQueueSize?: number;
    maxExportBatchSize?: number;
    exportTimeoutMillis?: number;
  };
}

function intFrom(env: Env, name: string): number | undefined {
  const raw = nonEmpty(env[name]);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0)
    throw new TracingConfigError(`${name} must be a non-negative integer, got "${raw}"`);
  return n;
}

function samplerFrom(env: Env): Sampler {
  const name = (nonEmpty(env.OTEL_TRACES_SAMPLER) ?? 'parentbased_always_on').toLowerCase();
  const argRaw = nonEmpty(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = () => {
    const r = argRaw === undefined ? 1 : Number(argRaw);
    if (!(r >= 0 && r <= 1))
      throw new TracingConfigError(`OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got "${argRaw}"`);
    return new TraceIdRatioBasedSampler(r);
  };
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio();
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio() });
    default:
      throw new TracingConfigError(
        `OTEL_TRACES_SAMPLER "${name}" is not supported; use always_on, always_off, traceidratio or parentbased_{always_on,always_off,traceidratio}`,
      );
  }
}

/**
 * What the OTEL_* variables ask for, or undefined when tracing stays off: OTEL_SDK_DISABLED,
 * OTEL_TRACES_EXPORTER=none, or no OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT. Throws
 * TracingConfigError for a value it cannot honour (gRPC, an unknown sampler, a bad URL).
 */
export function tracingConfigFromEnv(env: Env, defaultServiceName: string): TracingConfig | undefined {
  const url = tracesEndpoint(env);
  if (url === undefined) return undefined;
  const protocol = nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) ?? nonEmpty(env.OTEL_EXPORTER_OTLP_PROTOCOL);
  if (protocol !== undefined && protocol !== 'http/protobuf' && protocol !== 'http/json')
    throw new TracingConfigError(
      `OTLP protocol "${protocol}" is not supported; use http/protobuf or http/json (gRPC is not built in)`,
    );
  const resource = parseKeyPairsIntoRecord(nonEmpty(env.OTEL_RESOURCE_ATTRIBUTES));
  const serviceName = nonEmpty(env.OTEL_SERVICE_NAME) ?? resource['service.name'] ?? defaultServiceName;
  const timeout = intFrom(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT') ?? intFrom(env, 'OTEL_EXPORTER_OTLP_TIMEOUT');
  return {
    url,
    protocol: protocol ?? 'http/protobuf',
    serviceName,
    resource,
    sampler: samplerFrom(env),
    headers: {
      ...parseKeyPairsIntoRecord(nonEmpty(env.OTEL_EXPORTER_OTLP_HEADERS)),
      ...parseKeyPairsIntoRecord(nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS)),
    },
    ...(timeout === undefined ? {} : { timeoutMillis: timeout }),
    batch: {
      scheduledDelayMillis: intFrom(env, 'OTEL_BSP_SCHEDULE_DELAY'),
      maxQueueSize: intFrom(env, 'OTEL_BSP_MAX_QUEUE_SIZE'),
      maxExportBatchSize: intFrom(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
      exportTimeoutMillis: intFrom(env, 'OTEL_BSP_EXPORT_TIMEOUT'),
    },
  };
}

let version: string | undefined;
/** This build's version, from package.json (service.version). */
export function serviceVersion(): string {
  if (version === undefined) {
    try {
      version = (
        JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
      ).version;
    } catch {
      version = '0.0.0';
    }
  }
  return version;
}

/** One process's (or one phone's) trace pipeline: provider → batch processor → OTLP exporter. */
export class Tracing {
  readonly tracer: Tracer;
  readonly provider: TracerProvider;
  readonly processor: SpanProcessor;
  readonly exporter: SpanExporter;

  constructor(
    readonly config: TracingConfig,
    instanceId: string,
    scope: string,
  ) {
    const opts = {
      url: config.url,
      headers: config.headers,
      ...(config.timeoutMillis === undefined ? {} : { timeoutMillis: config.timeoutMillis }),
    };
    this.exporter = config.protocol === 'http/json' ? new JsonExporter(opts) : new ProtoExporter(opts);
    const batch = Object.fromEntries(Object.entries(config.batch).filter(([, v]) => v !== undefined));
    this.processor = new BatchSpanProcessor({ ...batch, exporter: this.exporter });
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({
        ...config.resource,
        'service.name': config.serviceName,
        'service.version': serviceVersion(),
        'service.instance.id': instanceId,
      }),
      sampler: config.sampler,
      spanProcessors: [this.processor],
    });
    this.tracer = this.provider.getTracer(scope, serviceVersion());
  }

  flush(): Promise<void> {
    return this.provider.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}

/** A pipeline for this environment, or undefined when the OTEL_* variables leave tracing off. */
export function createTracing(opts: {
  env?: Env;
  defaultServiceName: string;
  instanceId: string;
  scope?: string;
}): Tracing | undefined {
  const config = tracingConfigFromEnv(opts.env ?? process.env, opts.defaultServiceName);
  return config && new Tracing(config, opts.instanceId, opts.scope ?? 'phonebridge');
}
