// The types of build.mjs, plain JavaScript because it runs before dist/ exists.
export declare const BUILD_INFO: string;
export declare function changedSince(root: string): string[];
export declare function buildIfChanged(
  root: string,
  log?: (line: string) => void,
  stdio?: 'inherit' | 'ignore',
): { changed: string[]; status: number };
