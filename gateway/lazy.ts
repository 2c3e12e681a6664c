import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Handler } from './http.js';

// A surface that most processes never serve (the settings pages, Swagger UI, MCP) is loaded on
// its first request, not at start: its modules and their dependencies stay out of memory until
// then. A failed load is retried on the next request instead of being remembered.

/** `load` run on the first call and its promise shared by the calls after; run again after a failure. */
function loadOnce<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () => {
    if (!loading) {
      loading = load();
      loading.catch(() => {
        loading = undefined;
      });
    }
    return loading;
  };
}

export function lazyHandler(load: () => Promise<RequestHandler>): RequestHandler {
  const loaded = loadOnce(load);
  return (req: Request, res: Response, next: NextFunction) => {
    loaded().then((handler) => handler(req, res, next), next);
  };
}

/** lazyHandler for a node:http surface's Handler (server.ts): a failed load is answered by the request shell. */
export function lazyServe(load: () => Promise<Handler>): Handler {
  const loaded = loadOnce(load);
  return async (x) => (await loaded())(x);
}
