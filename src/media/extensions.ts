/** File extensions of the media types the service and its workers hand around (unknown: `bin`). */
const EXTENSIONS: Record<string, string> = {
  'image/jpeg': 'jpg',
  'image/png': 'png',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'image/avif': 'avif',
  'image/bmp': 'bmp',
  'image/tiff': 'tif',
  'video/mp4': 'mp4',
  'video/quicktime': 'mov',
  'video/webm': 'webm',
  'video/x-matroska': 'mkv',
  'audio/mpeg': 'mp3',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/ogg': 'ogg',
  'audio/flac': 'flac',
  'audio/x-flac': 'flac',
  'audio/mp4': 'm4a',
  'audio/x-m4a': 'm4a',
  'application/json': 'json',
  'text/plain': 'txt',
};

/** The extension for a media type (parameters such as `; charset=utf-8` ignored). */
export function extensionOf(mime: string | undefined): string {
  const base = (mime ?? '').split(';')[0]!.trim().toLowerCase();
  return EXTENSIONS[base] ?? 'bin';
}

/** Media types by extension: the table above read backwards (the first type listed for an extension wins). */
const MEDIA_TYPES: Record<string, string> = {};
for (const [mime, ext] of Object.entries(EXTENSIONS))
  MEDIA_TYPES[ext] ??= mime === 'text/plain' ? 'text/plain; charset=utf-8' : mime;

/** The media type to serve a stored file under, from its name's extension (unknown: octet-stream). */
export function mediaTypeOfName(name: string): string {
  const dot = name.lastIndexOf('.');
  return (dot >= 0 ? MEDIA_TYPES[name.slice(dot + 1).toLowerCase()] : undefined) ?? 'application/octet-stream';
}
