"""The kubectl plugin, ``kubectl nettraffic``.

May import: anything in kubectl_nettraffic; never the webhook.
"""
