"""Video family: PyAV clip decoding with keyframe seeking, the UCF101 index and clip sampling, video
transforms, ``video-tsn`` (TSN on ResNet18) and ``r2plus1d_18`` (torchvision, Kinetics-400 weights).

    import zoo
    model = zoo.build("video-tsn", num_classes=101)
    zoo.train(model, "UCF-101", splits="ucfTrainTestlist", fold=1, epochs=1)   # or a DIR/<class>/<video> folder
    zoo.predict(model, "v_ApplyEyeMakeup_g01_c01.avi", topk=5)
"""

from zoo._lazy import lazy_exports
from zoo.registry import declare
from zoo.video import cli as _cli  # noqa: F401  (registers --splits, a command and the demo step; no torch)

declare("video-tsn", family="video", module="zoo.video.tsn",
        summary="Temporal Segment Network: ResNet18 per segment + temporal consensus (avg or attention)")
declare("r2plus1d_18", family="video", module="zoo.video.r2plus1d",
        summary="R(2+1)D-18 (torchvision) video ResNet; Kinetics-400 weights, head adapted to UCF101's 101 classes")

_EXPORTS = {
    "VideoClassifierMixin": "zoo.video.classifier",
    "scan_video_folder": "zoo.video.classifier",
    "CorruptVideoError": "zoo.video.decoding",
    "DecodeStats": "zoo.video.decoding",
    "VideoMeta": "zoo.video.decoding",
    "probe": "zoo.video.decoding",
    "read_all_frames": "zoo.video.decoding",
    "read_frames": "zoo.video.decoding",
    "evaluate_videos": "zoo.video.evaluation",
    "video_eval_fn": "zoo.video.evaluation",
    "predict_video": "zoo.video.predict",
    "R2Plus1D18": "zoo.video.r2plus1d",
    "R2Plus1DConfig": "zoo.video.r2plus1d",
    "SplitEntry": "zoo.video.splits",
    "SplitFileError": "zoo.video.splits",
    "read_class_index": "zoo.video.splits",
    "read_split": "zoo.video.splits",
    "SyntheticConfig": "zoo.video.synthetic",
    "make_synthetic_actions": "zoo.video.synthetic",
    "render_clip": "zoo.video.synthetic",
    "write_video": "zoo.video.synthetic",
    "TSNConfig": "zoo.video.tsn",
    "VideoTSN": "zoo.video.tsn",
    "UCF101": "zoo.video.ucf101",
    "VideoClipDataset": "zoo.video.ucf101",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
        "UCF101",
        "CorruptVideoError",
        "DecodeStats",
        "R2Plus1D18",
        "R2Plus1DConfig",
        "SplitEntry",
    "SplitFileError",
        "SyntheticConfig",
        "TSNConfig",
        "VideoClassifierMixin",
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
        "scan_video_folder",
        "video_eval_fn",
        "write_video",
]
