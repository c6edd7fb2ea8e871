"""Structure-aware fuzzing generated from ``protocol/*.schema``.

``schemas`` reads the schema files; ``values`` draws valid requests for any API
key and version as hypothesis strategies; ``pieces`` encodes them piece by
piece, so that ``mutations`` know where each length, string and tag section
lies; ``batches`` draws record batches, valid and hostile. ``codec_target``
feeds cases to the codecs in process, ``live_target`` to a broker over sockets.
"""
