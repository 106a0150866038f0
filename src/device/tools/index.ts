export { createPhoneServer, TOOL_CATALOG, TOOL_SCOPES, type PhoneServerOptions } from './server.ts';
export {
  LAUNCH_VERSION,
  SURFACE_VERSION,
  SCOPE_META_KEY,
  CALLER_META_KEY,
  REPLAYED_META_KEY,
  FRAME_LIMIT_BYTES,
  RESULT_LIMIT_BYTES,
  LOCAL_CALLER,
  type Caller,
} from './contract.ts';
export { controlFor, PhoneControl } from './control.ts';
