"""JigSaw's torch side: the SPB training engine (``worker.spb``) and the model/data zoo
(``worker.zoo``). Depends on ``jigsaw`` (pure core); ``jigsaw`` never imports this package."""
