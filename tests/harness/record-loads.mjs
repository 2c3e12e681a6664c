// Given to node with --import: appends the URL of every module the process loads, one per line,
// to the file RECORD_LOADS names. Module hooks run on a thread of their own, which loads this
// file again as the hooks module; only the main thread registers it.
import { appendFileSync } from 'node:fs';
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

let file;

export function initialize(data) {
  file = data;
}

export async function load(url, context, nextLoad) {
  appendFileSync(file, url + '\n');
  return nextLoad(url, context);
}

if (isMainThread) register(import.meta.url, { data: process.env.RECORD_LOADS });
