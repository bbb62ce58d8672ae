"""Vision family: ResNet18 with fine-tuning surgery, image folders, transforms bound to weights, export.

    model = zoo.build("resnet18", weights="cifar10", num_classes=2)   # head re-initialised, with a warning
    result = zoo.finetune(model, "hymenoptera_data", strategy="head")
    zoo.vision.predict(result.model, "photos/")
"""

from zoo.vision import cli as _cli  # noqa: F401  (registers zoo finetune / predict and the demo step)
from zoo.vision import resnet  # noqa: F401  (registers "resnet18")
from zoo.vision.data import ImageFolderDataset, load_image_folders
from zoo.vision.evaluate import evaluate_classifier
from zoo.vision.export import export_onnx, export_torchscript  # also registers what zoo.export ships
from zoo.vision.predict import predict
from zoo.vision.resnet import adapt_input_conv, replace_head, resnet18
from zoo.vision.transforms import transforms_for

__all__ = [
           "ImageFolderDataset",
           "adapt_input_conv",
           "evaluate_classifier",
           "export_onnx",
           "export_torchscript",
           "load_image_folders",
           "predict",
           "replace_head",
           "resnet18",
           "transforms_for",
]
