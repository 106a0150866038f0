// A usage mistake on the command line: services/cli.ts main() prints it with the usage and exits
// 64 (docs/OPERATIONS.md, "Exit codes"). Its own module so that every command's file can throw it.
export class UsageError extends Error {}
