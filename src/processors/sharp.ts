/**
 * sharp as every processor uses it. Import it from here (the main thread must load sharp before any
 * worker thread does, lovell/sharp#2263: otherwise glibc may unload libvips when a worker exits and
 * the next worker crashes).
 *
 * libvips' operation cache is off: no job repeats an operation on the same pixels, and the cache
 * (process-wide, up to 50 MB) only added to the peak RSS (the video bench: −20 MB without it).
 */
import sharp from 'sharp';

sharp.cache(false);

export default sharp;
