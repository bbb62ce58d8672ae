"""Video family: PyAV clip decoding with keyframe seeking, the UCF101 index and clip sampling, video
transforms, ``video-tsn`` (TSN on ResNet18) and ``r2plus1d_18`` (torchvision, Kinetics-400 weights).

    import zoo
    from zoo.video import UCF101, transforms as VT
    train = UCF101("UCF-101", "ucfTrainTestlist", fold=1, train=True, sampling="segments", num_segments=8,
                   transform=VT.Compose([VT.Resize(128), VT.RandomCrop(112), VT.ToFloat(),
                                         VT.Normalize(VT.IMAGENET_MEAN, VT.IMAGENET_STD)]))
    model = zoo.build("video-tsn")                      # 101 classes
    zoo.train(model, train, epochs=1, batch_size=8)
"""

from zoo.video import cli as _cli  # noqa: F401  (registers the data adapter, a command and the demo step)
from zoo.video import export as _export  # noqa: F401  (what zoo.export ships: the clip classifier)
from zoo.video import r2plus1d, tsn  # noqa: F401  (register "r2plus1d_18" and "video-tsn")
from zoo.video.decoding import CorruptVideoError, DecodeStats, VideoMeta, probe, read_all_frames, read_frames
from zoo.video.evaluation import evaluate_videos, video_eval_fn
from zoo.video.predict import predict_video
from zoo.video.splits import SplitEntry, read_class_index, read_split
from zoo.video.synthetic import SyntheticConfig, make_synthetic_actions, render_clip, write_video
from zoo.video.tsn import VideoTSN
from zoo.video.ucf101 import UCF101, VideoClipDataset

__all__ = [
    "UCF101",
    "CorruptVideoError",
    "DecodeStats",
    "SplitEntry",
    "SyntheticConfig",
    "VideoClipDataset",
    "VideoMeta",
    "VideoTSN",
    "evaluate_videos",
    "make_synthetic_actions",
    "predict_video",
    "probe",
    "read_all_frames",
    "read_class_index",
    "read_frames",
    "read_split",
    "render_clip",
    "video_eval_fn",
    "write_video",
]
