/** What ffprobe says about a media file, reduced to what the video jobs need. */
import { JobError } from '../../errors.js';
import { FfmpegError, runToEnd } from './ffmpeg.js';

export interface VideoStreamInfo {
  /** Stored (coded) size, before rotation. */
  width: number;
  height: number;
  /** Frame rate as a fraction, e.g. "30000/1001". */
  rate: string;
  fps: number;
  /** Frame count: from the container when it says, else duration × fps. */
  frames: number;
  /** Clockwise rotation a player applies: 0, 90, 180 or 270. */
  rotation: 0 | 90 | 180 | 270;
  codec: string;
}

export interface AudioStreamInfo {
  codec: string;
  duration: number;
}

export interface MediaInfo {
  duration: number;
  formatName: string;
  video?: VideoStreamInfo;
  audio?: AudioStreamInfo;
}

interface ProbeStream {
  codec_type?: string;
  codec_name?: string;
  width?: number;
  height?: number;
  r_frame_rate?: string;
  avg_frame_rate?: string;
  nb_frames?: string;
  duration?: string;
  tags?: Record<string, string>;
  side_data_list?: { rotation?: number }[];
  disposition?: { attached_pic?: number };
}

function fraction(s: string | undefined): number {
  if (!s) return 0;
  const [n, d] = s.split('/').map(Number);
  return d ? n! / d : Number(n) || 0;
}

/**
 * Player rotation from either the old `rotate` tag or the display-matrix side data (whose angle is
 * counter-clockwise), normalised to a clockwise multiple of 90°.
 */
function rotationOf(s: ProbeStream): 0 | 90 | 180 | 270 {
  let deg = 0;
  if (s.tags?.rotate) deg = Number(s.tags.rotate);
  else {
    const sd = s.side_data_list?.find((d) => typeof d.rotation === 'number');
    if (sd) deg = -sd.rotation!;
  }
  const r = (((Math.round(deg / 90) * 90) % 360) + 360) % 360;
  return r as 0 | 90 | 180 | 270;
}

/** Probes `file`; a file ffprobe cannot read is invalid_media naming `label` (e.g. "input.target"). */
export async function probeMedia(
  ffprobe: string,
  file: string,
  label: string,
  signal: AbortSignal,
): Promise<MediaInfo> {
  let out: Buffer;
  try {
    out = await runToEnd(
      ffprobe,
      ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file],
      signal,
    );
  } catch (err) {
    signal.throwIfAborted();
    if (err instanceof FfmpegError) throw new JobError('invalid_media', `${label}: not a decodable media file`);
    throw err;
  }
  const json = JSON.parse(out.toString('utf8')) as {
    streams?: ProbeStream[];
    format?: { duration?: string; format_name?: string };
  };
  const streams = json.streams ?? [];
  const duration = Number(json.format?.duration) || 0;
  const info: MediaInfo = { duration, formatName: json.format?.format_name ?? '' };
  const v = streams.find((s) => s.codec_type === 'video' && !s.disposition?.attached_pic);
  if (v && v.width && v.height) {
    const rate = v.r_frame_rate && fraction(v.r_frame_rate) > 0 ? v.r_frame_rate : (v.avg_frame_rate ?? '0/1');
    const fps = fraction(rate);
    const vDuration = Number(v.duration) || duration;
    const frames = Number(v.nb_frames) || Math.round(vDuration * fps);
    info.video = {
      width: v.width,
      height: v.height,
      rate,
      fps,
      frames,
      rotation: rotationOf(v),
      codec: v.codec_name ?? '',
    };
  }
  const a = streams.find((s) => s.codec_type === 'audio');
  if (a) info.audio = { codec: a.codec_name ?? '', duration: Number(a.duration) || duration };
  return info;
}
