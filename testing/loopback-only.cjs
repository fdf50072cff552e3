/**
 * Preloaded (`node --require`) into an MCP reference server started for a test: a server that listens on a port
 * without naming a host (server-everything's Streamable HTTP mode does) listens on loopback only, as every server
 * a test starts must.
 */
'use strict';
const net = require('node:net');

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function listenOnLoopback(...args) {
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    const [port, ...rest] = args;
    const host = typeof rest[0] === 'string' ? rest.shift() : '127.0.0.1';
    return listen.call(this, Number(port), host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host, ...rest);
  }
  if (typeof args[0] === 'object' && args[0] !== null && !('path' in args[0])) {
    const options = args[0];
    return listen.call(this, { ...options, host: '127.0.0.1' }, ...args.slice(1));
  }
  return listen.apply(this, args);
};
