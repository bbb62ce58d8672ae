"""Vision family: ResNet18 with fine-tuning surgery, image folders, transforms bound to weights, export.

    model = zoo.build("resnet18", weights="cifar10", num_classes=2)   # head re-initialised, with a warning
    result = zoo.finetune(model, "hymenoptera_data", strategy="head")
    zoo.predict(result.model, "photos/")
"""

from zoo._lazy import lazy_exports
from zoo.registry import declare
from zoo.vision import cli as _cli  # noqa: F401  (registers zoo finetune and the demo step; imports no torch)

declare("resnet18", family="vision", module="zoo.vision.resnet",
        summary="ResNet18 (torchvision), fine-tunable: head surgery, in_chans, small-image stem")

_EXPORTS = {
    "ImageFolderDataset": "zoo.vision.data",
    "load_image_folders": "zoo.vision.data",
    "evaluate_classifier": "zoo.vision.evaluate",
    "export_onnx": "zoo.vision.export",
    "export_torchscript": "zoo.vision.export",
    "predict": "zoo.vision.predict",
    "ResNet18": "zoo.vision.resnet",
    "ResNet18Config": "zoo.vision.resnet",
    "adapt_input_conv": "zoo.vision.resnet",
    "replace_head": "zoo.vision.resnet",
    "reset_classifier": "zoo.engine.head",  # a torchvision model's head replacement (zoo's models have the method)
    "resnet18": "zoo.vision.resnet",
    "transforms_for": "zoo.vision.transforms",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "ImageFolderDataset",
    "ResNet18",
    "ResNet18Config",
    "adapt_input_conv",
    "evaluate_classifier",
    "export_onnx",
    "export_torchscript",
    "load_image_folders",
    "predict",
    "replace_head",
    "reset_classifier",
    "resnet18",
    "transforms_for",
]
