import { fileTypeFromBuffer } from 'file-type';

export interface OutputType {
  contentType: string;
  extension: string;
}

/**
 * The type of a remote worker's output, from its bytes: a sniffed media type wins over what the
 * worker declared; bytes no signature matches are accepted only as declared JSON or plain text
 * that really is valid UTF-8 JSON or text. Undefined: not a type the service hands out.
 */
export async function outputType(bytes: Buffer, declared: string | undefined): Promise<OutputType | undefined> {
  const sniffed = await fileTypeFromBuffer(bytes);
  if (sniffed) return { contentType: sniffed.mime, extension: sniffed.ext };
  const base = (declared ?? '').split(';')[0]!.trim().toLowerCase();
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
  if (base === 'application/json') {
    try {
      JSON.parse(text);
    } catch {
      return undefined;
    }
    return { contentType: 'application/json', extension: 'json' };
  }
  if (base === 'text/plain') return { contentType: 'text/plain; charset=utf-8', extension: 'txt' };
  return undefined;
}
