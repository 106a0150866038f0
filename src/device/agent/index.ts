// The reference phone's connection to the relay (docs/PROTOCOL.md, "Device connection").
export { AGENT_VERSION, DeviceAgent, runDevice, silentLogger, stderrLogger } from './agent.ts';
export type {
  AgentLogger,
  ConnectedEvent,
  DeviceAgentEvents,
  DeviceAgentOptions,
  DisconnectedEvent,
  McpServerLike,
  ReconnectingEvent,
  RunDeviceOptions,
  StopInfo,
  StopReason,
} from './agent.ts';
export { Backoff, BACKOFF_DEFAULTS, type BackoffOptions } from './backoff.ts';
export { PairingError, pairDevice, parseQrPayload, type PairOptions, type QrPayload } from './pairing.ts';
export { Pinger, PING_DEFAULTS, type PingableSocket, type PingOptions } from './pinger.ts';
export { PinMismatchError, spkiFingerprint } from './relay-http.ts';
export { loadIdentity, type DeviceIdentity } from './state.ts';
export {
  MAX_FRAME_BYTES,
  TOO_LARGE_RPC_CODE,
  WebSocketTransport,
  type WebSocketTransportOptions,
} from './ws-transport.ts';
