// What the phone does when the relay says a caller's credential was revoked
// (notifications/phonebridge/credential_revoked, docs/PROTOCOL.md). One dispatch point: every
// consequence of a revocation on the phone starts here.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import * as z from 'zod';
import type { PhoneControl } from './control.ts';

export const CREDENTIAL_REVOKED_METHOD = 'notifications/phonebridge/credential_revoked';

const CredentialRevoked = z.object({
  method: z.literal(CREDENTIAL_REVOKED_METHOD),
  params: z.object({ credential: z.string().min(1) }).passthrough(),
});

/** Everything a revoked credential held on this phone ends. */
export function onCredentialRevoked(control: PhoneControl, credential: string): void {
  control.releaseHeldBy(credential);
}

export function handleCredentialRevoked(mcp: McpServer, control: PhoneControl): void {
  mcp.server.setNotificationHandler(CredentialRevoked, (n) => onCredentialRevoked(control, n.params.credential));
}
