"""The stability card of a run (card.md, card.html, card.json): what it holds and how it reads."""
