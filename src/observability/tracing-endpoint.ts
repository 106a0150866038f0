// Whether the OTEL_* variables turn tracing on, and where the spans go, read without the
// OpenTelemetry SDK: a node with tracing off (the default) never loads it (tracing.ts loads
// tracing-pipeline.ts only when this names an endpoint).
import { ConfigError } from '../config.ts';

export type Env = Record<string, string | undefined>;

/** A setting the relay cannot honour: the process refuses to start (exit 2), like a bad flag. */
export class TracingConfigError extends ConfigError {}

export const nonEmpty = (v: string | undefined) => (v === undefined || v.trim() === '' ? undefined : v.trim());

/**
 * The OTLP traces endpoint the OTEL_* variables name, or undefined when tracing stays off:
 * OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER=none, or no OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT.
 * Throws TracingConfigError for an exporter other than otlp or an endpoint that is not http(s).
 */
export function tracesEndpoint(env: Env): string | undefined {
  if ((nonEmpty(env.OTEL_SDK_DISABLED) ?? '').toLowerCase() === 'true') return undefined;
  const exporters = (nonEmpty(env.OTEL_TRACES_EXPORTER) ?? 'otlp').toLowerCase();
  if (exporters === 'none') return undefined;
  if (exporters !== 'otlp')
    throw new TracingConfigError(`OTEL_TRACES_EXPORTER "${exporters}" is not supported; use otlp or none`);
  const specific = nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const general = nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  if (specific === undefined && general === undefined) return undefined;
  // The signal-specific URL is used as given; the general one gets the signal's path (OTLP spec).
  const url = specific ?? `${general!.replace(/\/+$/, '')}/v1/traces`;
  try {
    if (!/^https?:$/.test(new URL(url).protocol)) throw new Error();
  } catch {
    throw new TracingConfigError(`the OTLP traces endpoint must be an http(s) URL, got "${url}"`);
  }
  return url;
}
