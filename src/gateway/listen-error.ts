// Its own module so that the command line can recognise it without loading the gateway.

/** A port another process holds (or an address this host lacks): serve stops instead of sharing it. */
export class ListenError extends Error {}
